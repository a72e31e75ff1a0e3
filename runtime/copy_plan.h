// copy_plan.h: what a schedule's copies ask of the runtime -- the copy engine's link
// and host pool, and the offloads the runner must see finished before each op --
// worked out once, so that `memopt run`, `memopt tradeoff --run` and `memopt train`
// size their engines the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/copy_engine.h"
#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {

struct CopyPlan {
  // The chain's link, and a host pool that holds every byte one step offloads
  // (Note [Host pool size] in copy_plan.cpp).
  CopyEngineOptions engine;
  // solver::SimResult::offload_done_before for these ops (ExecutorOptions).
  std::vector<int> offload_done_before;
};

// Nothing when `ops` copy nothing. Throws std::invalid_argument naming `source` when
// they do and the chain has no link to emulate.
std::optional<CopyPlan> plan_copies(const solver::Chain& chain, const std::vector<solver::Op>& ops,
                                    const std::string& source);

}  // namespace memopt::runtime

// copy_plan.cpp: sizing a schedule's copy engine.
#include "runtime/copy_plan.h"

#include <stdexcept>

#include "solver/chain/simulate.h"

namespace memopt::runtime {

// Note [Host pool size]
// A step offloads each tensor at most once and the pool is recycled between steps
// (HostArena), so the pool holds the sum of what a step offloads. An `offload k`
// moves a_k: x_k bytes in one range. An `offload_saved k` moves each storage that
// stage k-1 saved beyond its input and output, one range each, every range aligned
// to HostArena::kAlignment: the profile gives their total, x̄_k - x_k, but not their
// count, so each stage gets 64 KiB on top -- room for a thousand storages, far more
// than any stage saves (a GPT-2 block saves a few dozen). An `offload_input k` moves
// the storages of a_k's own tensors, an `offload_carried k` those of its ending carry,
// with the same slack.
std::optional<CopyPlan> plan_copies(const solver::Chain& chain, const std::vector<solver::Op>& ops,
                                    const std::string& source) {
  constexpr int64_t kSavedStorageSlackBytes = 64 << 10;
  std::vector<int64_t> offloaded_bytes;
  for (const solver::Op& op : ops) {
    if (op.kind == solver::OpKind::Offload) offloaded_bytes.push_back(chain.x(op.index));
    if (op.kind == solver::OpKind::OffloadInput) offloaded_bytes.push_back(chain.own_bytes(op.index) + kSavedStorageSlackBytes);
    if (op.kind == solver::OpKind::OffloadCarried)
      offloaded_bytes.push_back(chain.ending_carried_bytes(op.index) + kSavedStorageSlackBytes);
    if (op.kind == solver::OpKind::OffloadSaved)
      offloaded_bytes.push_back(chain.xbar(op.index) - chain.x(op.index) + kSavedStorageSlackBytes);
  }
  if (offloaded_bytes.empty()) return std::nullopt;
  if (!chain.link)
    throw std::invalid_argument(source + ": the schedule offloads, but the profile has no link; give the link's "
                                "bandwidth when solving, or solve without offloading");
  CopyPlan plan;
  plan.engine = {chain.link->d2h_bytes_per_s, chain.link->h2d_bytes_per_s, HostArena::bytes_for(offloaded_bytes)};
  plan.offload_done_before = solver::simulate_timeline(chain, ops).offload_done_before;
  return plan;
}

}  // namespace memopt::runtime

// table_shelf.h: recompute tables of one chain, each filled once and read by every
// solve that prices subchains with it.
//
// Note [Tables shared between solves]
// The recompute table (rotor.h) depends only on the chain, the budget, the slots, the
// recurrence's variant and the slots past the budget it holds, and at operator
// granularity filling it costs more than most of what reads it. Several solves read
// the same one: `optimal` and `recompute-only` at one budget (`memopt solve`'s table
// of every solver, each point of a trade-off sweep) and the searches of `optimal`'s
// classes at the larger budgets of their starts (Note [The starts' tables shared by
// the classes] in optimal.cpp). A shelf lets the first of them fill it and the others,
// on this thread or beside it, wait for it and then read it. A table stays on the shelf
// while the shelf lives, so a shelf is made for the solves that share it and dropped
// after them: one shelf per budget, never one for a bisection over budgets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "solver/chain/chain.h"
#include "solver/dp/dp_options.h"
#include "solver/dp/rotor.h"

namespace memopt::solver {

class RecomputeTableShelf {
 public:
  // The table of `chain` at budget_bytes, dp.slots and dp's variant, with `extra_slots`
  // past the budget (Note [A table past its budget] in rotor.h), filled on first use
  // with dp.num_threads. Safe to call from several threads. A shelf serves one chain:
  // asked for another's table, it throws std::logic_error.
  std::shared_ptr<const RecomputeTable> get(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                            int64_t extra_slots = 0);
  // How many tables it holds.
  size_t size();
  // Drops every table it holds; a table handed out lives on with those who hold it.
  // For a caller whose remaining solves read none of them, so that their own tables do
  // not sit beside these.
  void clear();

 private:
  struct Entry {
    std::once_flag filled;
    std::shared_ptr<const RecomputeTable> table;
  };
  std::mutex mutex_;
  const Chain* chain_ = nullptr;
  std::map<std::tuple<int64_t, int, bool, int64_t>, std::shared_ptr<Entry>> entries_;
};

}  // namespace memopt::solver

// table_shelf.cpp: Note [Tables shared between solves].
#include "solver/search/table_shelf.h"

#include <stdexcept>

namespace memopt::solver {

std::shared_ptr<const RecomputeTable> RecomputeTableShelf::get(const Chain& chain, int64_t budget_bytes,
                                                               const DpOptions& dp, int64_t extra_slots) {
  std::shared_ptr<Entry> entry;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (chain_ && chain_ != &chain) throw std::logic_error("RecomputeTableShelf: a shelf serves one chain");
    chain_ = &chain;
    std::shared_ptr<Entry>& slot = entries_[{budget_bytes, dp.slots, dp.rotor_compat, extra_slots}];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  // A fill that throws leaves the flag unset: the next caller fills it again.
  std::call_once(entry->filled,
                 [&] { entry->table = std::make_shared<const RecomputeTable>(chain, budget_bytes, dp, extra_slots); });
  return entry->table;
}

size_t RecomputeTableShelf::size() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void RecomputeTableShelf::clear() {
  const std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

}  // namespace memopt::solver

// rotor.h: the exact keep/recompute DP of docs/formats.md, "The recompute DP" (rotor's persistent DP with
// the forward check of the keep branch fixed), and rotor's published variant.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/dp_options.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// The ops of the fastest persistent schedule whose peak fits budget_bytes, or nullopt
// when none fits at this discretisation. In rotor_compat mode the ops may exceed the
// budget (that is rotor's bug); the caller simulates and decides.
std::optional<std::vector<Op>> solve_recompute(const Chain& chain, int64_t budget_bytes,
                                               const DpOptions& options = {});

// Note [Time quantisation]: the DP tables hold times as int32 multiples of a
// power-of-two fraction of a millisecond, chosen so that the slowest possible
// schedule stays below 2^28 units. Integer sums do not depend on the order of
// addition, so every implementation of the recurrence (the fast one here and the
// plain one in the tests) gets bit-identical tables, and skipping work is exact.
struct TimeQuantum {
  double unit_ms = 1;
  int32_t units(double ms) const;  // rounded to nearest
};
TimeQuantum time_quantum_for(const Chain& chain);

// Sizes in slots for a budget: ceil(bytes * slots / budget), so that a schedule that
// fits in slots fits in bytes (a negative backward transient rounds up as well).
int64_t bytes_to_slots(int64_t bytes, int64_t budget_bytes, int slots);

// The filled table of one solve: C(m, s, t) for every subchain and every m in
// 0..slots + extra_slots, so that other solvers (offload.h) can price any subchain at
// any memory. Sizes are in slots of budget_bytes / options.slots, times in quantum
// units. Note [A table past its budget]: a cell depends only on cells at no more
// memory, so the extra slots leave every value at m <= slots as it is without them;
// one table answers the budget and every larger memory up to slots + extra_slots
// slots of the same size.
class RecomputeTable {
 public:
  static constexpr int64_t kInfinity = int64_t{1} << 30;

  RecomputeTable(const Chain& chain, int64_t budget_bytes, const DpOptions& options = {}, int64_t extra_slots = 0);
  ~RecomputeTable();
  RecomputeTable(const RecomputeTable&) = delete;
  RecomputeTable& operator=(const RecomputeTable&) = delete;

  int64_t slots() const;             // the last m the table holds: options.slots + extra_slots
  TimeQuantum quantum() const;
  int64_t x_slots(int k) const;      // a_k, k in 0..L+1
  int64_t ftmp_slots(int i) const;
  int64_t uf_units(int i) const;     // a no-grad forward (fwd_ckpt / fwd_drop) of stage i
  // bwd i right after fwd_keep i, as the base case prices it (Note [A stage run back to
  // back] in chain.h).
  int64_t ub_after_keep_units(int i) const;
  // C(m, s, t): least time of subchain (s, t) with a_s outside m and d_{t+1} inside;
  // kInfinity when nothing fits (also for m < 0). Inline: the offload DP reads it in
  // its innermost loop.
  int64_t value(int s, int t, int64_t m) const {
    if (m < 0) return kInfinity;
    if (m > slots_) m = slots_;  // more memory than the table holds never helps here
    return row(s, t)[m];
  }
  // C(m, s, t) for m = 0 .. slots(), in order: the row value() reads.
  const int32_t* row(int s, int t) const {
    const size_t pair = static_cast<size_t>(s) * (2 * (length_ + 1) - s + 1) / 2 + static_cast<size_t>(t - s);
    return values_ + pair * static_cast<size_t>(slots_ + 1);
  }
  int64_t finite_from(int s, int t) const;  // smallest m with a finite value, slots+1 if none
  // Appends the ops of the schedule that attains value(s, t, m).
  void emit(int s, int t, int64_t m, std::vector<Op>& ops) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // The filled table, rows of slots_ + 1 values per subchain (s, t) in the order of
  // rotor.cpp's Table::pair; owned by impl_.
  const int32_t* values_ = nullptr;
  int length_ = 0;
  int64_t slots_ = 0;
};

// The plain Θ(slots·L³) reference of the same recurrence, on the same quantised
// inputs: used by tests and benchmarks to check that the fast DP gives identical
// values. Returns C(slots - x_0, 0, L) in quantum units, or nullopt if infeasible.
std::optional<int64_t> reference_recompute_value(const Chain& chain, int64_t budget_bytes,
                                                 const DpOptions& options = {});
// Every cell of that reference, C(m, s, t) for s <= t <= L and m = 0 .. slots, in that
// order (s, then t, then m), kInfinity where nothing fits: tests hold the fast
// table's every value against it.
std::vector<int64_t> reference_recompute_cells(const Chain& chain, int64_t budget_bytes,
                                               const DpOptions& options = {});
// The fast DP's value for the same question.
std::optional<int64_t> fast_recompute_value(const Chain& chain, int64_t budget_bytes,
                                            const DpOptions& options = {});

}  // namespace memopt::solver

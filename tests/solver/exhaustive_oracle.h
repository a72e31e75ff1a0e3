// exhaustive_oracle.h: the fastest plan the timeline simulator (docs/formats.md
// section 5) accepts within a budget, found by searching every op sequence of the
// full vocabulary -- not a solver's class. The reference the offload DP is held to.
// Shares nothing with solver/offload.cpp or solver/rotor.cpp; it prices compute
// ops with compute_cost (solver/simulate.h) and judges plans with simulate_timeline.
//
// Note [What the oracle enumerates]
// Every sequence of the ops fwd_keep, fwd_ckpt, fwd_drop, loss, bwd, offload,
// prefetch, offload_saved and prefetch_saved that simulate_timeline accepts, with
// two rules that define a training step rather than narrow it:
//  - the loss and each bwd run exactly once (a second one would add a gradient);
//  - each a_k and each ā_k moves at most once in each direction (one offload and
//    one prefetch of a_k, one offload_saved and one prefetch_saved of ā_k).
// Copies go anywhere between compute ops, in any order on the same link (the d2h
// and h2d copies of one gap commute: the links are independent and a prefetch's
// allocation at issue does not depend on an offload's free, so d2h copies are put
// first). The search is finite: between two bwd ops every forward op sets a
// higher activation than any it clears, and copies are bounded by the rule above.
// It is a branch and bound, and both bounds are exact lower bounds, so no plan
// faster than the one returned is pruned:
//  - memory: events before the start of the latest compute op are final (every
//    later event happens at or after it), so their running peak only grows;
//  - time: the compute stream still has to run every bwd, the loss and every
//    fwd_keep not yet run (each runs exactly once), back to back at best.
// A forward whose output nothing left could consume (its bwd, and every later one,
// already ran) is never tried: such a plan cannot end valid. Every plan the search
// completes is checked by simulate_timeline, whose peak and time are the ones
// compared. Exponential: meant for L <= 4.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain.h"
#include "solver/schedule.h"

namespace memopt::solver::testing {

struct OracleResult {
  std::optional<std::vector<Op>> ops;  // the fastest plan fitting the budget, if any
  double time_ms = 0;
  int64_t peak_bytes = 0;
  int64_t num_plans = 0;  // complete plans the search reached and simulated
  int64_t num_nodes = 0;  // op prefixes it visited
};

// The fastest valid plan with peak <= budget_bytes (the first found among equals).
OracleResult fastest_valid_plan(const Chain& chain, int64_t budget_bytes);

}  // namespace memopt::solver::testing

// exhaustive_oracle.h: the fastest plan the timeline simulator (docs/formats.md
// docs/formats.md, "Offload: the timeline simulator") accepts within a budget, found by searching
// every op sequence of the
// full vocabulary but the kept-input moves -- not a solver's class. The reference the
// offload DP is held to.
// Shares nothing with solver/dp/offload.cpp or solver/dp/rotor.cpp; it prices compute
// ops with compute_cost (solver/chain/simulate.h) and judges plans with simulate_timeline.
//
// Note [What the oracle enumerates]
// Every sequence of the ops fwd_keep, fwd_ckpt, fwd_drop, loss, bwd, offload,
// prefetch, offload_saved, prefetch_saved and wait_offloads that simulate_timeline
// accepts -- the whole vocabulary but offload_input and prefetch_input (Note [A kept
// stage's input may leave] in solver/chain/simulate.h): with those the search no longer
// fits in memory at four stages. An incumbent plan given to the search may use them;
// the result is then the fastest of it and every plan of this vocabulary. Two rules
// define a training step rather than narrow it:
//  - the loss and each bwd run exactly once (a second one would add a gradient);
//  - each a_k and each ā_k moves at most once in each direction (one offload and
//    one prefetch of a_k, one offload_saved and one prefetch_saved of ā_k).
// Copies go anywhere between compute ops, in any order on the same link (the d2h
// and h2d copies of one gap commute: the links are independent and a prefetch's
// allocation at issue does not depend on an offload's free, so d2h copies are put
// first). An offload and the prefetch of the same data may share a gap: the round
// trip is one way for a plan to make a compute op wait until another copy has freed
// its bytes, so it is not the same as leaving the data in place. wait_offloads is
// the other: it goes anywhere in a gap while an offload is still running (a wait
// with nothing to wait for changes nothing, so it is not tried), and the copies
// after it issue when it ends. The search is finite: between two bwd ops every
// forward op sets a higher activation than any it clears, copies are bounded by the
// rule above, and a wait needs an offload issued since the last one.
// It is a branch and bound, and both bounds are exact lower bounds, so no plan
// faster than the one returned is pruned:
//  - memory: events before the start of the latest compute op are final (every
//    later event happens at or after it), so their running peak only grows;
//  - time: the compute stream still has to run every bwd, the loss and every
//    fwd_keep not yet run (each runs exactly once), back to back at best.
// Only ever prefixes the simulator accepts are extended: an exact cut below (Note
// [Equal futures]) must not let an invalid prefix stand for a valid one.
// A forward whose output nothing left could consume (its bwd, and every later one,
// already ran) is never tried: such a plan cannot end valid. Every plan the search
// completes is checked by simulate_timeline, whose peak and time are the ones
// compared. Exponential: meant for L <= 5.
//
// Note [Equal futures]
// Two prefixes with the same residency, the same one-shot flags, the same copies in
// the current gap, and the same times and pending memory events relative to the end
// of their last compute op have the same continuations, and each continuation adds
// the same time and the same memory events after that instant: what was final
// before it only has to fit the budget, which both prefixes already do. So the one
// whose compute stream ended later can never finish faster, and is cut. Times that
// lie before that instant count as that instant (every use takes the maximum with
// a time at or after it), and so do times of things no longer resident. This is an
// exact dominance, not a heuristic: it only removes plans no faster than one kept.
//
// Note [Saved states that stay]
// Two more exact bounds, cuts like the two Notes above (the search without cuts
// does not use them, so the test comparing the two checks them too):
//  - memory: every bwd i still to run holds at its start d_{i+1}, the whole ā_{i+1},
//    its input, d_i and its transient, and besides them every ā_k resident now with
//    k < i, which only bwd k-1 frees, after bwd i: at least x_k of it (its saved
//    state may go to the host), all of x̄_k once it has made its one round trip;
//  - time: the data on the host comes back over the one h2d link, one copy after
//    another, and after each copy its consumer's bwd and every later bwd still run.
// Both count distinct objects, so they hold for chains without carried bytes, the
// only chains the oracle takes.
//
// Note [Copies issued too early]
// If the last copy a gap put on a link starts at or after the end of the compute op
// that follows, and that op waits for nothing it brings (and, for an offload, its
// prefetch is not in the same gap), the plan that issues the copy right after the
// op instead is enumerated too, and is at least as good: the copy starts at the
// same instant, after the same copies on its link, so every time is unchanged; an
// offload frees at the same instant and a prefetch allocates later. So the earlier
// issue is cut. Only the last copy of a link is moved, so the order on the link is
// kept; and only one issued after the gap's last wait_offloads (moving an offload
// across a wait would change what the wait waits for).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver::testing {

struct OracleResult {
  std::optional<std::vector<Op>> ops;  // the fastest plan fitting the budget, if any
  double time_ms = 0;
  int64_t peak_bytes = 0;
  int64_t num_plans = 0;  // complete plans the search reached and simulated
  int64_t num_nodes = 0;  // op prefixes it visited
  int64_t num_dominated = 0;  // prefixes cut by Note [Equal futures]
};

// The fastest valid plan with peak <= budget_bytes (the first found among equals).
// An incumbent -- any valid plan, a solver's say -- only seeds the time bound: the
// search still covers every plan faster than it, and returns it when there is none
// (or a faster one). A plan over the budget seeds nothing.
OracleResult fastest_valid_plan(const Chain& chain, int64_t budget_bytes, const std::vector<Op>* incumbent = nullptr);

// The same search without the cuts of Notes [Equal futures] and [Copies issued too
// early]: only the two bounds prune. Its reference in the tests, on tiny chains.
OracleResult fastest_valid_plan_without_cuts(const Chain& chain, int64_t budget_bytes);

}  // namespace memopt::solver::testing

// offload_pipeline.h: a family of offload plans outside the item DP's class
// (solver/dp/offload.h), tried by `optimal` beside it and simulated like every candidate.
//
// Note [Pipelined offload candidates]
// Where a block saves far more than one of its forward ops can move over the
// link, the fast plans let the d2h copies of the saved state queue across many
// forward ops and issue each prefetch several backward ops ahead, so that the h2d
// link runs behind a whole stretch of backward. The item DP's class rules out both
// (each copy ends within the next item's first op; a prefetch is at most one item
// ahead). This family has the shape:
//   fwd_ckpt 0, fwd_drop 1 .. p-1             (a prefix recomputed from a_0)
//   fwd_keep k, [offload_input k,] offload_saved k+1 for p <= k < q (a middle whose
//                                             saved state, and inputs, move)
//   fwd_keep q .. L-1, loss                   (a kept suffix)
//   bwd L-1 .. p, with `prefetch_saved k+1` [and `prefetch_input k`] issued just
//   before `bwd k+d` (or right after the loss when k+d >= L), in stage order on the
//   h2d link
//   then the recompute DP's schedule of the prefix 0 .. p-1 with d_p resident.
// The bracketed ops are one variant (Note [A kept stage's input may leave] in
// simulate.h): at operator granularity a kept stage's input is most of what the
// middle holds. It is tried for a (p, q) only where the plan without it does not fit
// at any prefetch distance: trying it wherever that plan was held back by memory (did
// not fit with every prefetch right after the loss) made the family much slower on
// the solver bench's chains (BM_SolveOffloadPipeline) and found no other plan on the
// GPT-2 operator-stage profiles. It is
// searched over every (p, q) and, for each, over the prefetch distance d by
// bisection for the largest d whose plan fits: a larger d holds more bytes earlier
// and stalls less. Every plan is simulated with the timeline simulator and only
// fitting ones are returned, so the family can only make `optimal` faster; it is
// not a proof of optimality (tests/solver/exhaustive_oracle.h is the reference).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/rotor.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// The plan of Note [Pipelined offload candidates] for one (p, q, d); `prefix` is the
// recompute DP's schedule of stages 0 .. p-1 (empty when p = 0).
// With `inputs`, the middle's inputs move too.
std::vector<Op> pipelined_offload_ops(const Chain& chain, int p, int q, int d, const std::vector<Op>& prefix,
                                      bool inputs = false);

// What one search did: the plans it simulated (Note [Middles too short to fit]'s
// bisection aside) and the middles its bound cut (Note [Middles too slow to win] in
// offload_pipeline.cpp), for the tests.
struct PipelineSearchCounts {
  int64_t plans_simulated = 0;
  int64_t middles_cut = 0;
};

// The fastest fitting plan of the family, the first in the order p, q, the inputs, d
// on a tie, or nullopt (also without a link). `table`, if given, is the recompute table
// of this chain, budget and options, as for solve_offload.
std::optional<std::vector<Op>> solve_offload_pipeline(const Chain& chain, int64_t budget_bytes,
                                                      const DpOptions& options = {},
                                                      const RecomputeTable* table = nullptr,
                                                      PipelineSearchCounts* counts = nullptr);

}  // namespace memopt::solver

// offload.h: keep / recompute / offload chosen jointly under a budget and the
// link bandwidths (SPEC section 5: checkpointed stage inputs a_k move).
//
// Note [The offload schedule class]
// The chain is cut into segments [b_0 = 0, b_1), ..., [b_n, L]. The forward phase
// runs each segment but the last as `fwd_ckpt b_k, fwd_drop ...`, keeping only its
// input a_{b_k}, which stays on the device or is offloaded right after its first
// use. The last segment and then every earlier one, right to left, is solved by
// the exact recompute DP (rotor.h) with the memory its turn leaves. The offloaded
// input of segment k-1 is prefetched when segment k's backward starts, so the copy
// hides behind that segment's compute.
// Segments are chosen by a DP over (next segment start, device bytes of the inputs
// kept so far, previous input if it was offloaded). With one segment this is the
// recompute DP, so the value is never worse than recompute-only.
// Approximations, each on the safe side for memory (the returned schedule is always
// re-simulated, and `predicted` is the simulator's):
//  - an offloaded a_{b_k} is counted on the device for its whole forward segment,
//    and offloading is allowed only when its copy fits within the forward time of
//    the segment after `fwd_ckpt b_k`, so the d2h link never queues;
//  - a prefetch holds its bytes for the whole backward of the segment after it;
//    a copy longer than that segment's backward adds its excess as a stall.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain.h"
#include "solver/rotor.h"
#include "solver/schedule.h"

namespace memopt::solver {

// Needs chain.link; without one (or with zero bandwidth) it is solve_recompute.
std::optional<std::vector<Op>> solve_offload(const Chain& chain, int64_t budget_bytes, const DpOptions& options = {});

// Baseline: checkpoint every stage input, offload each (but the last stage's), and
// prefetch each one segment ahead.
std::vector<Op> offload_all_ops(const Chain& chain);
std::optional<std::vector<Op>> offload_all(const Chain& chain, int64_t budget_bytes, const DpOptions& options = {});

}  // namespace memopt::solver

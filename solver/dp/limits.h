// limits.h: the largest problem memopt solves, and the most slots a table may have.
#pragma once

#include <cstdint>

#include "solver/chain/chain.h"

namespace memopt::solver {

// Note [Largest problem]
// The recompute DP takes time ∝ slots·L³ and a table of 4 bytes × slots × L²/2
// (docs/formats.md, "Fill order, cost and limits"); the offload DP's states take about six
// times the table (offload_dp_bytes in offload.h). The time grows as L³, so a chain of
// thousands of stages would take weeks and its table hundreds of GiB, while GPT-2 xl
// cut into sublayers has under 300 stages (the solver benchmark's
// BM_SolveOperatorStages rows time the longest chains memopt meets). So memopt refuses
// chains longer than kMaxStages (every solver: one rule, one message) and tables or
// states above kMaxTableBytes, each with the fix, instead of hanging or being killed
// for memory.
inline constexpr int kMaxStages = 512;
inline constexpr int64_t kMaxTableBytes = int64_t{4} << 30;

// The most slots a recompute table on `chain` may have within kMaxTableBytes.
int64_t max_recompute_table_slots(const Chain& chain);
// The most slots the offload DP's states on `chain` may have within kMaxTableBytes.
int64_t max_offload_dp_slots(const Chain& chain);

}  // namespace memopt::solver

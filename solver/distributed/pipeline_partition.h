// pipeline_partition.h: cut a chain into P contiguous pipeline stages balanced by
// profiled time, and the sub-chain each pipeline stage runs. Plain arithmetic.
#pragma once

#include <vector>

#include "solver/chain/chain.h"

namespace memopt::solver {

// The P-1 cut points c_1 < ... < c_{P-1} (pipeline stage k runs chain stages
// [c_k, c_{k+1}) with c_0 = 0, c_P = n) minimising the largest part's total cost.
// Exact (a DP over prefixes, O(P n^2)); among optimal cuts the lexicographically
// smallest. Every part is non-empty, so 1 <= parts <= cost.size().
// `cuttable` (empty: all) says per chain stage i whether a cut may fall before it;
// throws std::invalid_argument when no `parts` non-empty parts can be cut.
std::vector<int> balanced_cuts(const std::vector<double>& cost, int parts, const std::vector<bool>& cuttable = {});

// The balanced cuts of `chain` by stage_costs, only where one pipeline stage can hand
// a_k to the next: not inside a run of carried bytes (a_k that carries its
// predecessor's tensors, c_k > 0, Note [Carried bytes] -- operator stages are cut
// between blocks).
std::vector<int> pipeline_cuts(const Chain& chain, int parts);

// Per chain stage fwd_ms + bwd_ms (the loss's backward counts with the last stage):
// what one micro-batch costs a pipeline stage in a 1F1B steady state.
std::vector<double> stage_costs(const Chain& chain);

// Chain stages [begin, end) as a chain of its own: its input is a_begin; it ends
// with the original loss when end == L, otherwise with a free loss op that only
// seeds d_end (received from the next pipeline stage). Parameter reads from homes
// before `begin` become the first reader's own parameters (Note [Parameter homes]).
Chain sub_chain(const Chain& chain, int begin, int end);

// The chain for a batch of `rows` sequences when it was profiled with `profiled_rows`:
// activation bytes and times scale linearly (bytes rounded up). MODELED: exact for
// GPT-2's activations, which are all proportional to B; times are an estimate.
Chain scale_batch(const Chain& chain, int64_t rows, int64_t profiled_rows);

}  // namespace memopt::solver

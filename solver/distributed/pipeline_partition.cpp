// pipeline_partition.cpp: balanced contiguous cuts, sub-chains, batch scaling.
#include "solver/distributed/pipeline_partition.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace memopt::solver {

std::vector<int> balanced_cuts(const std::vector<double>& cost, int parts, const std::vector<bool>& cuttable) {
  const int n = static_cast<int>(cost.size());
  if (parts < 1 || parts > n)
    throw std::invalid_argument("pipeline: " + std::to_string(parts) + " pipeline stages for a chain of " +
                                std::to_string(n) + " stages; each pipeline stage needs at least one chain stage");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][j]: the least possible largest part when the first j stages form k parts.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(parts + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (int j = k; j <= n; ++j)
      for (int i = k - 1; i < j; ++i) {
        if (k > 1 && !cuttable.empty() && !cuttable.at(static_cast<size_t>(i))) continue;
        const double v = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        if (v < best[k][j]) {  // strict: the smallest i wins ties
          best[k][j] = v;
          from[k][j] = i;
        }
      }
  if (best[parts][n] == inf)
    throw std::invalid_argument("pipeline: " + std::to_string(parts) + " pipeline stages cannot be cut from this chain: "
                                "too few places where one stage hands a single activation to the next (operator "
                                "stages are cut between blocks only); use fewer pipeline stages");
  std::vector<int> cuts(parts - 1);
  for (int k = parts, j = n; k > 1; --k) {
    j = from[k][j];
    cuts[k - 2] = j;
  }
  return cuts;
}

std::vector<double> stage_costs(const Chain& chain) {
  std::vector<double> cost;
  for (int i = 0; i < chain.length(); ++i) cost.push_back(chain.uf(i) + chain.ub(i));
  cost.back() += chain.loss.bwd_ms;
  return cost;
}

std::vector<int> pipeline_cuts(const Chain& chain, int parts) {
  std::vector<bool> cuttable;
  for (int i = 0; i < chain.length(); ++i) cuttable.push_back(chain.carried(i) == 0);
  return balanced_cuts(stage_costs(chain), parts, cuttable);
}

Chain sub_chain(const Chain& chain, int begin, int end) {
  if (begin < 0 || end > chain.length() || begin >= end)
    throw std::invalid_argument("sub_chain: [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") is not a non-empty range of the chain's " + std::to_string(chain.length()) + " stages");
  Chain c;
  c.input_bytes = chain.x(begin);
  c.link = chain.link;
  c.loss = end == chain.length() ? chain.loss : LossStage{};
  // A home before `begin` is re-homed at its first reader inside the range.
  std::map<int, int> rehomed;  // old home -> new index
  for (int i = begin; i < end; ++i) {
    Stage s = chain.stages[i];
    std::vector<std::pair<int, int64_t>> reads;
    for (const auto& [home, bytes] : s.param_reads) {
      if (home >= begin) {
        reads.emplace_back(home - begin, bytes);
      } else if (auto it = rehomed.find(home); it != rehomed.end()) {
        reads.emplace_back(it->second, bytes);
      } else {
        rehomed[home] = i - begin;
        s.param_bytes = s.param_bytes.value_or(0) + bytes;
      }
    }
    s.param_reads = std::move(reads);
    c.stages.push_back(std::move(s));
  }
  return c;
}

Chain scale_batch(const Chain& chain, int64_t rows, int64_t profiled_rows) {
  if (rows < 1 || profiled_rows < 1) throw std::invalid_argument("scale_batch: batch sizes must be positive");
  if (rows == profiled_rows) return chain;
  const auto bytes = [&](int64_t b) {
    return static_cast<int64_t>((static_cast<__int128>(b) * rows + profiled_rows - 1) / profiled_rows);
  };
  const double f = static_cast<double>(rows) / static_cast<double>(profiled_rows);
  Chain c = chain;
  c.input_bytes = bytes(c.input_bytes);
  for (Stage& s : c.stages) {
    s.fwd_ms *= f;
    s.bwd_ms *= f;
    if (s.fwd_nograd_ms) *s.fwd_nograd_ms *= f;
    if (s.fwd_bwd_pair_ms) *s.fwd_bwd_pair_ms *= f;
    s.out_bytes = bytes(s.out_bytes);
    s.saved_bytes = bytes(s.saved_bytes);
    s.fwd_tmp_bytes = bytes(s.fwd_tmp_bytes);
    if (s.fwd_keep_tmp_bytes) s.fwd_keep_tmp_bytes = bytes(*s.fwd_keep_tmp_bytes);
    s.bwd_tmp_bytes = bytes(s.bwd_tmp_bytes);
  }
  c.loss.bwd_ms *= f;
  c.loss.bwd_tmp_bytes = bytes(c.loss.bwd_tmp_bytes);
  return c;
}

}  // namespace memopt::solver

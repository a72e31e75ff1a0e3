// offload_pipeline.cpp: the plan family of Note [Pipelined offload candidates].
#include "solver/dp/offload_pipeline.h"

#include <algorithm>

#include "solver/chain/simulate.h"

namespace memopt::solver {

std::vector<Op> pipelined_offload_ops(const Chain& chain, int p, int q, int d, const std::vector<Op>& prefix,
                                      bool inputs) {
  const int L = chain.length();
  std::vector<Op> ops;
  if (p > 0) {
    ops.push_back({OpKind::FwdCkpt, 0});
    for (int k = 1; k < p; ++k) ops.push_back({OpKind::FwdDrop, k});
  }
  for (int k = p; k < L; ++k) {
    ops.push_back({OpKind::FwdKeep, k});
    if (k < q && inputs && chain.own_bytes(k) > 0) ops.push_back({OpKind::OffloadInput, k});
    if (k < q && chain.xbar(k + 1) > chain.x(k + 1)) ops.push_back({OpKind::OffloadSaved, k + 1});
  }
  ops.push_back({OpKind::Loss, -1});
  int next = std::min(q, L) - 1;  // the highest stage whose saved state is still on the host
  for (int i = L - 1; i >= p; --i) {
    for (; next >= p && next + d >= i; --next) {
      if (chain.xbar(next + 1) > chain.x(next + 1)) ops.push_back({OpKind::PrefetchSaved, next + 1});
      if (inputs && chain.own_bytes(next) > 0) ops.push_back({OpKind::PrefetchInput, next});
    }
    ops.push_back({OpKind::Bwd, i});
  }
  ops.insert(ops.end(), prefix.begin(), prefix.end());
  return ops;
}

std::optional<std::vector<Op>> solve_offload_pipeline(const Chain& chain, int64_t budget_bytes,
                                                      const DpOptions& options, const RecomputeTable* given_table) {
  if (!chain.has_usable_link()) return std::nullopt;
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const int L = chain.length();
  std::optional<RecomputeTable> own_table;
  const RecomputeTable& table = given_table ? *given_table : own_table.emplace(chain, budget_bytes, options);
  const int64_t m = options.slots - table.x_slots(0);  // a given table may hold more
  std::optional<std::vector<Op>> best;
  double best_ms = 0;
  const auto consider = [&](std::vector<Op> ops) {
    const SimResult r = simulate_timeline(chain, ops, budget_bytes);  // Note [Stopping over the budget]
    if (!fits(r, budget_bytes)) return false;
    if (!best || r.time_ms < best_ms) { best = std::move(ops); best_ms = r.time_ms; }
    return true;
  };
  for (int p = 0; p < L; ++p) {
    std::vector<Op> prefix;
    if (p > 0) {
      if (table.value(0, p - 1, m) >= RecomputeTable::kInfinity) continue;
      table.emit(0, p - 1, m, prefix);
    }
    // Every plan of this p has the same compute ops: where they alone take as long as
    // the best plan so far, none of them can replace it (compute_only_ms, simulate.h).
    if (best && compute_only_ms(chain, pipelined_offload_ops(chain, p, p + 1, 1, prefix, false)) >= best_ms) continue;
    for (int q = p + 1; q <= L; ++q) {
      const int farthest = L - p + 1;  // beyond L - p every prefetch follows the loss
      for (const bool inputs : {false, true}) {
        // Bisection for the largest fitting distance: d = 1 first, which holds least.
        const bool fits_near = consider(pipelined_offload_ops(chain, p, q, 1, prefix, inputs));
        int lo = 1, hi = farthest;  // lo fits
        while (fits_near && lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (consider(pipelined_offload_ops(chain, p, q, mid, prefix, inputs))) lo = mid;
          else hi = mid - 1;
        }
        // Note [Pipelined offload candidates]: the inputs only where the plan without
        // them does not fit.
        if (fits_near) break;
      }
    }
  }
  return best;
}

}  // namespace memopt::solver

// offload_pipeline.cpp: the plan family of Note [Pipelined offload candidates].
#include "solver/dp/offload_pipeline.h"

#include <algorithm>
#include <optional>

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

namespace {

// Note [Middles too short to fit]
// Most (p, q) of a long chain hold more than the budget before their loss: the
// stages after the middle keep everything, and the link cannot drain the middle fast
// enough. Up to and including the loss, the plans of one p differ only in which
// copies they issue: their compute ops, and so every allocation, are the same ops at
// the same times (nothing in the forward waits for a copy), and a larger q only adds
// offloads, each after every offload of a smaller q on the d2h link, which delays
// none of those. So at every compute op up to the loss, the sum that Note [Stopping
// over the budget] (simulate.cpp) compares with the budget is no larger for a larger
// q, with or without the inputs (each variant on its own: the inputs' copies delay
// the saved states' on the link). Where the plan of some q stops over the budget at
// or before its loss, so does that of every smaller q, at any prefetch distance (the
// prefetches all come after the loss). The search therefore bisects for the least q
// whose plan does not stop there, and simulates only from it on: the same plans, and
// on long chains a few simulations per p where there were two per q.

// Whether the plan stops over the budget at or before its loss.
bool stops_by_the_loss(const Chain& chain, const std::vector<Op>& ops, int64_t budget_bytes) {
  const SimResult r = simulate_timeline(chain, ops, budget_bytes);
  const auto loss = std::find(ops.begin(), ops.end(), Op{OpKind::Loss, -1});
  return r.stopped_over && r.error_op <= static_cast<int>(loss - ops.begin());
}

// The least q in p+1 .. L whose plan does not stop by its loss, or L + 1.
int least_middle_end(const Chain& chain, int64_t budget_bytes, int p, const std::vector<Op>& prefix, bool inputs) {
  const int L = chain.length();
  const auto stops = [&](int q) { return stops_by_the_loss(chain, pipelined_offload_ops(chain, p, q, 1, prefix, inputs), budget_bytes); };
  if (stops(L)) return L + 1;
  int lo = p + 1, hi = L;  // the answer is in lo .. hi, and q = hi does not stop
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (stops(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace

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
  // The plans of one p share their compute ops and, one after the next, long prefixes
  // (Note [Resuming from a shared prefix] in simulate.cpp).
  std::optional<TimelinePrefix> resumed;
  const auto consider = [&](std::vector<Op> ops) {
    const SimResult r = resumed->simulate(ops, budget_bytes);  // Note [Stopping over the budget]
    resumed->rebase(ops);
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
    std::vector<Op> first = pipelined_offload_ops(chain, p, p + 1, 1, prefix, false);
    const double compute_ms = compute_only_ms(chain, first);
    if (best && compute_ms >= best_ms) continue;
    resumed.emplace(chain, std::move(first), compute_ms);
    // Note [Middles too short to fit]: below these q, the plans surely do not fit.
    const int least_q[2] = {least_middle_end(chain, budget_bytes, p, prefix, false),
                            least_middle_end(chain, budget_bytes, p, prefix, true)};
    for (int q = std::min(least_q[0], least_q[1]); q <= L; ++q) {
      const int farthest = L - p + 1;  // beyond L - p every prefetch follows the loss
      for (const bool inputs : {false, true}) {
        // Bisection for the largest fitting distance: d = 1 first, which holds least.
        const bool fits_near = q >= least_q[inputs] && consider(pipelined_offload_ops(chain, p, q, 1, prefix, inputs));
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

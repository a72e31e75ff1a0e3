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
    if (k < q && chain.hollow_bytes(k + 1) > 0) ops.push_back({OpKind::OffloadSaved, k + 1});
  }
  ops.push_back({OpKind::Loss, -1});
  int next = std::min(q, L) - 1;  // the highest stage whose saved state is still on the host
  for (int i = L - 1; i >= p; --i) {
    for (; next >= p && next + d >= i; --next) {
      if (chain.hollow_bytes(next + 1) > 0) ops.push_back({OpKind::PrefetchSaved, next + 1});
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

// The least q in p+1 .. most_q whose plan does not stop by its loss, or most_q + 1.
int least_middle_end(const Chain& chain, int64_t budget_bytes, int p, int most_q, const std::vector<Op>& prefix,
                     bool inputs) {
  const auto stops = [&](int q) { return stops_by_the_loss(chain, pipelined_offload_ops(chain, p, q, 1, prefix, inputs), budget_bytes); };
  if (stops(most_q)) return most_q + 1;
  int lo = p + 1, hi = most_q;  // the answer is in lo .. hi, and q = hi does not stop
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (stops(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Note [Middles too slow to win]
// Every copy of a plan of (p, q) belongs to its middle, and each offload is issued
// after fwd_keep p. The prefetches are issued after the loss, in the reverse order of
// the offloads, the first of them bringing back what the last offload took out: so
// the first cannot start before the loss has run, nor before every offload has ended,
// and the h2d link then carries every byte the middle moves before the last prefetch
// ends. The bwd of that prefetch's stage (p or later) waits for it, and bwd p and the
// prefix's schedule run after it. So no plan of (p, q), at any prefetch distance,
// with or without the inputs, ends before
//   max(compute up to the loss, compute up to fwd_keep p + the middle's d2h time)
//   + the middle's h2d time + bwd p (at its back-to-back price where that is less)
//   + the prefix's compute,
// the middle's times those of its saved states' hollow bytes (the inputs only add to
// them). That bound grows with q, so once it passes the best time so far by more than
// a billionth (for the sums' rounding), no later q of that p can beat or tie the best
// plan: its middles end there, and Note [Middles too short to fit]'s bisection runs
// only below.
//
// Note [The longest prefix first]
// The search returns the first fastest plan in the plain order (p rising, then q, the
// inputs, d as the bisection tries them), as the plain search of the header does.
// Where this family matters, at operator granularity over a link slow beside the
// saved bytes, only plans with a long prefix fit at all: rising from p = 0, the search
// simulated every middle of every short prefix before any plan could bound anything.
// So it first visits the longest prefix, p = L - 1: its plans recompute the most and
// keep the least, its one middle is a single stage, and a plan of it that fits bounds
// every later p by Note [Middles too slow to win]. Then p rises from 0 as before. A
// plan of a shorter prefix than the best's wins a tie in time (within one p, the
// first one found does), so the plan returned is the plain order's. A prefix is
// skipped where its compute alone (compute_only_ms, simulate.h) exceeds the best
// time, or equals it and the best plan's prefix is shorter: none of its plans could
// then come first.

// The bound of Note [Middles too slow to win] for the plans of one p, q by q.
class MiddleBound {
 public:
  MiddleBound(const Chain& chain, int p, const std::vector<Op>& prefix) : chain_(chain), end_(p) {
    const int L = chain.length();
    for (int k = 0; k < p; ++k) to_keep_ms_ += chain.uf_nograd(k);
    to_keep_ms_ += chain.uf(p);
    to_loss_ms_ = to_keep_ms_;
    for (int k = p + 1; k < L; ++k) to_loss_ms_ += chain.uf(k);
    to_loss_ms_ += chain.ub(L);
    after_ms_ = std::min(chain.ub(p), chain.ub_after_keep(p)) + compute_only_ms(chain, prefix);
  }
  // The bound for the middle p .. q-1; q never falls from one call to the next.
  double at(int q) {
    for (; end_ < q; ++end_) {
      const int64_t bytes = chain_.hollow_bytes(end_ + 1);
      if (bytes <= 0) continue;
      d2h_ms_ += chain_.link->d2h_ms(bytes);
      h2d_ms_ += chain_.link->h2d_ms(bytes);
    }
    return std::max(to_loss_ms_, to_keep_ms_ + d2h_ms_) + h2d_ms_ + after_ms_;
  }

 private:
  const Chain& chain_;
  int end_;  // the middle's copies summed: p .. end_-1
  double to_keep_ms_ = 0;  // the compute up to fwd_keep p
  double to_loss_ms_ = 0;  // up to the loss
  double after_ms_ = 0;    // bwd p and the prefix's schedule
  double d2h_ms_ = 0, h2d_ms_ = 0;
};

}  // namespace

std::optional<std::vector<Op>> solve_offload_pipeline(const Chain& chain, int64_t budget_bytes,
                                                      const DpOptions& options, const RecomputeTable* given_table,
                                                      PipelineSearchCounts* counts) {
  if (!chain.has_usable_link()) return std::nullopt;
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const int L = chain.length();
  std::optional<RecomputeTable> own_table;
  const RecomputeTable& table = given_table ? *given_table : own_table.emplace(chain, budget_bytes, options);
  const int64_t m = options.slots - table.x_slots(0);  // a given table may hold more
  std::optional<std::vector<Op>> best;
  double best_ms = 0;
  int best_p = L;
  PipelineSearchCounts counted;
  // The plans of one p share their compute ops and, one after the next, long prefixes
  // (Note [Resuming from a shared prefix] in simulate.cpp).
  std::optional<TimelinePrefix> resumed;
  int p = 0;
  const auto consider = [&](std::vector<Op> ops) {
    ++counted.plans_simulated;
    const SimResult r = resumed->simulate(ops, budget_bytes);  // Note [Stopping over the budget]
    resumed->rebase(ops);
    if (!fits(r, budget_bytes)) return false;
    // Note [The longest prefix first]: a shorter prefix's plan wins a tie.
    if (!best || r.time_ms < best_ms || (r.time_ms == best_ms && p < best_p)) {
      best = std::move(ops);
      best_ms = r.time_ms;
      best_p = p;
    }
    return true;
  };
  for (int visit = 0; visit < L; ++visit) {
    p = visit == 0 ? L - 1 : visit - 1;  // Note [The longest prefix first]
    std::vector<Op> prefix;
    if (p > 0) {
      if (table.value(0, p - 1, m) >= RecomputeTable::kInfinity) continue;
      table.emit(0, p - 1, m, prefix);
    }
    // Every plan of this p has the same compute ops: where they alone take longer than
    // the best plan so far, none of them can replace it (compute_only_ms, simulate.h).
    std::vector<Op> first = pipelined_offload_ops(chain, p, p + 1, 1, prefix, false);
    const double compute_ms = compute_only_ms(chain, first);
    if (best && (compute_ms > best_ms || (compute_ms == best_ms && p > best_p))) continue;
    // Note [Middles too slow to win]: the last q whose plans may still win.
    int most_q = L;
    if (best) {
      MiddleBound bound(chain, p, prefix);
      const double to_beat_ms = best_ms * (1 + 1e-9);
      for (int q = p + 1; q <= L; ++q)
        if (bound.at(q) >= to_beat_ms) {
          most_q = q - 1;
          break;
        }
      counted.middles_cut += L - most_q;
      if (most_q <= p) continue;
    }
    resumed.emplace(chain, std::move(first), compute_ms);
    // Note [Middles too short to fit]: below these q, the plans surely do not fit.
    const int least_q[2] = {least_middle_end(chain, budget_bytes, p, most_q, prefix, false),
                            least_middle_end(chain, budget_bytes, p, most_q, prefix, true)};
    for (int q = std::min(least_q[0], least_q[1]); q <= most_q; ++q) {
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
  if (counts) *counts = counted;
  return best;
}

}  // namespace memopt::solver

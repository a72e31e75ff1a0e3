// offload.cpp: the segment DP of Note [The offload schedule class].
#include "solver/offload.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "solver/simulate.h"

namespace memopt::solver {
namespace {

constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max();

// State: the next segment starts at e, `device` slots of earlier segment inputs stay
// on the device, and prev is the previous segment's start when its input was
// offloaded (it must be prefetched during this segment's backward), else -1.
struct StateIndex {
  int L;
  int64_t S;
  size_t operator()(int e, int64_t device, int prev) const {
    return (static_cast<size_t>(e) * static_cast<size_t>(S + 1) + static_cast<size_t>(device)) *
               static_cast<size_t>(L + 2) + static_cast<size_t>(prev + 1);
  }
  size_t size() const { return static_cast<size_t>(L + 1) * static_cast<size_t>(S + 1) * static_cast<size_t>(L + 2); }
};

struct Back {
  int from_e = -1;
  int64_t from_device = 0;
  int from_prev = -1;
  bool offloaded = false;
};

}  // namespace

std::optional<std::vector<Op>> solve_offload(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  if (!chain.link || !(chain.link->d2h_bytes_per_s > 0) || !(chain.link->h2d_bytes_per_s > 0))
    return solve_recompute(chain, budget_bytes, options);
  if (budget_bytes <= 0 || options.slots <= 0) return std::nullopt;
  const int L = chain.length();
  const RecomputeTable table(chain, budget_bytes, options);
  const int64_t S = table.slots();
  const double unit_ms = table.quantum().unit_ms;
  const auto d2h_units = [&](int k) {
    return 1000.0 * static_cast<double>(chain.x(k)) / chain.link->d2h_bytes_per_s / unit_ms;
  };
  const auto h2d_units = [&](int k) {
    return static_cast<int64_t>(std::ceil(1000.0 * static_cast<double>(chain.x(k)) / chain.link->h2d_bytes_per_s / unit_ms));
  };
  std::vector<int64_t> uf_prefix(L + 2, 0);
  for (int i = 0; i <= L; ++i) uf_prefix[i + 1] = uf_prefix[i] + table.uf_units(i);

  const StateIndex index{L, S};
  std::vector<int64_t> best(index.size(), kUnreached);
  std::vector<Back> back(index.size());
  best[index(0, 0, -1)] = 0;
  int64_t answer = kUnreached;
  Back answer_back;

  for (int e = 0; e <= L; ++e) {
    for (int64_t device = 0; device <= S; ++device) {
      for (int prev = -1; prev < e; ++prev) {
        const int64_t so_far = best[index(e, device, prev)];
        if (so_far == kUnreached) continue;
        // During this segment's backward: the kept inputs, its own input and the
        // prefetch buffer of the previous input.
        const int64_t m = S - device - table.x_slots(e) - (prev >= 0 ? table.x_slots(prev) : 0);
        if (m < 0) continue;
        const auto stall = [&](int64_t inner) {
          return prev >= 0 ? std::max<int64_t>(0, h2d_units(prev) - inner) : 0;
        };
        // The last segment: the recompute DP from a_e through the loss.
        if (const int64_t inner = table.value(e, L, m); inner < RecomputeTable::kInfinity) {
          const int64_t total = so_far + inner + stall(inner);
          if (total < answer) { answer = total; answer_back = {e, device, prev, false}; }
        }
        // A segment [e, next): forward pass now, its backward later with memory m.
        int64_t fwd_work = table.x_slots(e + 1) + table.ftmp_slots(e);
        for (int next = e + 1; next <= L; ++next) {
          if (next > e + 1)
            fwd_work = std::max(fwd_work, table.x_slots(next - 1) + table.x_slots(next) + table.ftmp_slots(next - 1));
          if (device + table.x_slots(e) + fwd_work > S) break;  // only grows with next
          const int64_t inner = table.value(e, next - 1, m);
          if (inner >= RecomputeTable::kInfinity) continue;
          const int64_t cost = so_far + (uf_prefix[next] - uf_prefix[e]) + inner + stall(inner);
          for (const bool offload : {false, true}) {
            if (offload && d2h_units(e) > static_cast<double>(uf_prefix[next] - uf_prefix[e + 1])) continue;
            const int64_t next_device = device + (offload ? 0 : table.x_slots(e));
            if (next_device > S) continue;
            const size_t to = index(next, next_device, offload ? e : -1);
            if (cost < best[to]) { best[to] = cost; back[to] = {e, device, prev, offload}; }
          }
        }
      }
    }
  }
  if (answer == kUnreached) return std::nullopt;

  // Walk back to the segment starts and their offload flags, left to right.
  struct Segment { int start; bool offloaded; int64_t device; int prev; };
  std::vector<Segment> segments{{answer_back.from_e, false, answer_back.from_device, answer_back.from_prev}};
  for (Back b = back[index(answer_back.from_e, answer_back.from_device, answer_back.from_prev)]; b.from_e >= 0;
       b = back[index(b.from_e, b.from_device, b.from_prev)]) {
    segments.push_back({b.from_e, b.offloaded, b.from_device, b.from_prev});
    if (b.from_e == 0) break;
  }
  std::reverse(segments.begin(), segments.end());

  std::vector<Op> ops;
  const int n = static_cast<int>(segments.size());
  for (int k = 0; k + 1 < n; ++k) {
    const int b = segments[k].start, e = segments[k + 1].start;
    ops.push_back({OpKind::FwdCkpt, b});
    if (segments[k].offloaded) ops.push_back({OpKind::Offload, b});
    for (int i = b + 1; i < e; ++i) ops.push_back({OpKind::FwdDrop, i});
  }
  for (int k = n - 1; k >= 0; --k) {
    const Segment& seg = segments[k];
    const int end = k == n - 1 ? L : segments[k + 1].start - 1;
    if (k > 0 && segments[k - 1].offloaded) ops.push_back({OpKind::Prefetch, segments[k - 1].start});
    const int64_t m = S - seg.device - table.x_slots(seg.start) - (seg.prev >= 0 ? table.x_slots(seg.prev) : 0);
    table.emit(seg.start, end, m, ops);
  }
  return ops;
}

std::vector<Op> offload_all_ops(const Chain& chain) {
  const int L = chain.length();
  std::vector<Op> ops;
  for (int i = 0; i + 1 < L; ++i) {
    ops.push_back({OpKind::FwdCkpt, i});
    ops.push_back({OpKind::Offload, i});
  }
  for (int i = L - 1; i >= 0; --i) {
    if (i > 0) ops.push_back({OpKind::Prefetch, i - 1});
    ops.push_back({OpKind::FwdKeep, i});
    if (i == L - 1) ops.push_back({OpKind::Loss, -1});
    ops.push_back({OpKind::Bwd, i});
  }
  return ops;
}

std::optional<std::vector<Op>> offload_all(const Chain& chain, int64_t budget_bytes, const DpOptions&) {
  std::vector<Op> ops = offload_all_ops(chain);
  if (!fits(simulate_timeline(chain, ops), budget_bytes)) return std::nullopt;
  return ops;
}

}  // namespace memopt::solver

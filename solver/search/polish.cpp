// polish.cpp: the local search of Note [Polishing a plan's copies].
#include "solver/search/polish.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "solver/chain/plan_edits.h"
#include "solver/chain/simulate.h"

namespace memopt::solver {
namespace {

// The plan so far and its simulation; `take` keeps a candidate only if it is better
// (Note [Repairing a plan over the budget] in polish.h: the excess first).
struct Search {
  const Chain& chain;
  int64_t budget_bytes;
  std::vector<Op> ops;
  SimResult sim;
  PlanKey sim_key;          // key(sim, ops)
  std::unique_ptr<TimelinePrefix> prefix;  // of ops (Note [Resuming from a shared prefix] in simulate.cpp)
  // While deferring and the plan is over the budget, a candidate that fits is not
  // taken at once: the fastest one is remembered (Note [The best repair first] in
  // polish.h).
  bool deferring = false;
  struct Fitting {
    std::vector<Op> ops;
    SimResult sim;
    PlanKey key;
  };
  std::optional<Fitting> best_fitting;

  PlanKey key(const SimResult& x, const std::vector<Op>& plan) const { return plan_key(x, plan, budget_bytes); }

  // `refused_at`, where given: the op at which the simulator refused the candidate
  // (Note [Refused round trips] in polish.h), or -1; `late`, where given: whether it
  // ends after the repair in hand and the plan (Note [Repairs that end after the best
  // one] in polish.h), which it is then not taken for.
  bool take(std::vector<Op> candidate, int* refused_at = nullptr, bool* late = nullptr) {
    const bool repairing = deferring && over_budget();
    const bool bounded = repairing && best_fitting;
    const double not_after_ms = bounded ? std::max(best_fitting->key.time_ms, sim_key.time_ms)
                                        : std::numeric_limits<double>::infinity();
    SimResult r = simulate_to_beat(*prefix, candidate, sim_key, budget_bytes, not_after_ms);
    if (refused_at) *refused_at = refused(r) ? r.error_op : -1;
    const bool ends_late = bounded && (r.valid ? r.time_ms > not_after_ms : r.stopped_late);
    if (late) *late = ends_late;
    if (!r.valid || ends_late) return false;
    const PlanKey candidate_key = key(r, candidate);
    if (!(candidate_key < sim_key)) return false;
    if (repairing && r.peak_bytes <= budget_bytes) {
      if (!best_fitting || candidate_key < best_fitting->key)
        best_fitting = Fitting{std::move(candidate), std::move(r), candidate_key};
      return false;
    }
    set(std::move(candidate), std::move(r));
    return true;
  }
  void set(std::vector<Op> plan, SimResult result) {
    ops = std::move(plan);
    sim = std::move(result);
    sim_key = key(sim, ops);
    prefix->rebase(ops);
  }

  bool over_budget() const { return sim.peak_bytes > budget_bytes; }

  // PolishOptions::focus: whether moves of an op of this index are tried.
  const std::vector<char>& focus;
  bool in_focus(int index) const {
    return focus.empty() || (index >= 0 && static_cast<size_t>(index) < focus.size() && focus[index]);
  }
  bool in_focus(const Op& op) const {
    return op.kind == OpKind::WaitOffloads || in_focus(op.kind == OpKind::Loss ? chain.length() : op.index);
  }
};

bool movable(OpKind kind) { return is_copy(kind) || kind == OpKind::WaitOffloads; }

bool shift_pass(Search& s, int window) {
  bool any = false;
  for (size_t p = 0; p < s.ops.size(); ++p) {
    if (!movable(s.ops[p].kind) || !s.in_focus(s.ops[p])) continue;
    for (int step = 1; step <= window; ++step) {
      bool done = false;
      for (const int sign : {-1, 1}) {
        const std::ptrdiff_t q = static_cast<std::ptrdiff_t>(p) + sign * step;
        if (q < 0 || q >= static_cast<std::ptrdiff_t>(s.ops.size())) continue;
        if (s.take(moved(s.ops, p, static_cast<size_t>(q)))) { done = true; break; }
      }
      if (done) { any = true; break; }
    }
  }
  return any;
}

// A recomputation (a forward after the loss) moved up to two positions earlier,
// past backward ops or copies (Note [Polishing a plan's copies] in polish.h).
bool recompute_pass(Search& s) {
  bool any = false;
  const auto loss = std::find(s.ops.begin(), s.ops.end(), Op{OpKind::Loss, -1});
  if (loss == s.ops.end()) return false;
  const size_t after = static_cast<size_t>(loss - s.ops.begin()) + 1;
  for (size_t p = after + 1; p < s.ops.size(); ++p) {
    if (!is_forward(s.ops[p].kind) || !s.in_focus(s.ops[p])) continue;
    for (size_t step = 1; step <= 2 && p >= after + step; ++step)
      if (s.take(moved(s.ops, p, p - step))) { any = true; break; }
  }
  return any;
}

bool drop_pass(Search& s) {
  bool any = false;
  for (size_t p = 0; p < s.ops.size(); ++p) {
    const OpKind kind = s.ops[p].kind;
    if ((kind == OpKind::WaitOffloads || is_offload(kind)) && s.in_focus(s.ops[p]))
      any = s.take(dropped(s.ops, p)) || any;
  }
  return any;
}

// Note [A wait that waits for nothing] in polish.h: a wait is tried only before a compute
// op that some copy to the host issued before it may still be running at.
bool wait_pass(Search& s) {
  bool any = false;
  std::vector<int> done_before = simulate_timeline(s.chain, s.ops).offload_done_before;
  // The latest op by whose start every copy to the host before position p has ended
  // (INT_MAX where one of them ends after every op).
  int copies_end_by = -1;
  const auto add_copy = [&](size_t q) {
    if (is_offload(s.ops[q].kind))
      copies_end_by = std::max(copies_end_by, done_before[q] < 0 ? std::numeric_limits<int>::max() : done_before[q]);
  };
  for (size_t p = 0; p < s.ops.size(); ++p) {
    const OpKind kind = s.ops[p].kind;
    const bool in_flight = copies_end_by > static_cast<int>(p);
    add_copy(p);
    if (!in_flight || !info(kind).is_compute || (p > 0 && s.ops[p - 1].kind == OpKind::WaitOffloads) ||
        !s.in_focus(s.ops[p]))
      continue;
    if (!s.take(inserted(s.ops, p, {OpKind::WaitOffloads, -1}))) continue;
    any = true;
    ++p;  // the op after the new wait
    done_before = simulate_timeline(s.chain, s.ops).offload_done_before;
    copies_end_by = -1;
    for (size_t q = 0; q <= p; ++q) add_copy(q);
  }
  return any;
}

// Offload `out` right after position `made` and bring it back at one of the
// `window` positions before position `reader` (in the plan before the insertion).
bool try_round_trip(Search& s, size_t made, size_t reader, Op out, int window) {
  if (s.sim.peak_op >= 0 && made >= static_cast<size_t>(s.sim.peak_op)) return false;  // Note [Round trips after the peak] in polish.h
  const std::vector<Op> with_out = inserted(s.ops, made + 1, out);
  const Op back{way_back(out.kind), out.index};
  // reader moved one on; the prefetch goes before it, after the offload. Note [Refused
  // round trips] in polish.h: a refused offload ends the trip, and a refused prefetch
  // position is refused with every wait too; Note [Repairs that end after the best
  // one]: so is one that ends too late, for a wait only delays it.
  std::vector<char> no_waits(static_cast<size_t>(std::max(window, 0)), 0);
  for (size_t at = reader + 1, n = 0; at > made + 1 && n < static_cast<size_t>(window); --at, ++n) {
    int refused_at = -1;
    bool late = false;
    if (s.take(inserted(with_out, at, back), &refused_at, &late)) return true;
    if (refused_at >= 0 && static_cast<size_t>(refused_at) <= made + 1) return false;
    no_waits[n] = refused_at >= 0 || late;
  }
  if (!s.over_budget()) return false;
  // Over the budget, the offload frees its bytes only when its copy has ended: also
  // try each prefetch position with a wait before one of the `window` compute ops
  // that follow the offload.
  for (size_t at = reader + 1, n = 0; at > made + 1 && n < static_cast<size_t>(window); --at, ++n) {
    if (no_waits[n]) continue;
    const std::vector<Op> with_back = inserted(with_out, at, back);
    for (size_t w = made + 2, m = 0; w < with_back.size() && m < static_cast<size_t>(window); ++w) {
      if (!info(with_back[w].kind).is_compute) continue;
      ++m;
      if (s.take(inserted(with_back, w, {OpKind::WaitOffloads, -1}))) return true;
    }
  }
  return false;
}

bool first_round_trip_pass(Search& s, int window) {
  bool any = false;
  const int L = s.chain.length();
  for (int k = 0; k < L; ++k) {
    if (!s.in_focus(k + 1)) continue;
    if (const auto trip = saved_state_round_trip(s.chain, s.ops, k))
      any = try_round_trip(s, trip->made, trip->reader, trip->out, window) || any;
  }
  for (int k = 0; k < L; ++k) {
    if (!s.in_focus(k)) continue;
    for (const RoundTrip& trip : activation_round_trips(s.chain, s.ops, k)) {
      if (!try_round_trip(s, trip.made, trip.reader, trip.out, window)) continue;
      any = true;
      break;  // the plan changed: its positions are stale
    }
  }
  return any;
}

// Note [The best repair first] in polish.h: over the budget, the fastest round trip
// that makes the plan fit is taken once the whole pass has been tried.
bool round_trip_pass(Search& s, int window) {
  if (!s.over_budget()) return false;  // Note [Round trips only repair] in polish.h
  s.best_fitting.reset();
  s.deferring = true;
  const bool any = first_round_trip_pass(s, window);
  s.deferring = false;
  if (!s.best_fitting) return any;
  s.set(std::move(s.best_fitting->ops), std::move(s.best_fitting->sim));
  s.best_fitting.reset();
  return true;
}

}  // namespace

PlanKey plan_key(const SimResult& sim, const std::vector<Op>& ops, int64_t budget_bytes) {
  const auto num_copies = std::count_if(ops.begin(), ops.end(), [](const Op& op) { return is_copy(op.kind); });
  return {std::max<int64_t>(0, sim.peak_bytes - budget_bytes), sim.time_ms, num_copies, sim.peak_bytes};
}

namespace {
// simulate_to_beat's bounds: to_beat's peak while it is over the budget (a candidate
// holding more is over by more), else the budget and to_beat's time; and not after
// `not_after_ms`.
struct BeatBounds {
  int64_t above_bytes;
  double after_ms;
};
BeatBounds bounds_to_beat(const PlanKey& to_beat, int64_t budget_bytes, double not_after_ms) {
  if (to_beat.excess_bytes > 0) return {to_beat.peak_bytes, not_after_ms};
  return {budget_bytes, std::min(to_beat.time_ms, not_after_ms)};
}
}  // namespace

SimResult simulate_to_beat(const Chain& chain, const std::vector<Op>& ops, const PlanKey& to_beat,
                           int64_t budget_bytes, double not_after_ms) {
  const BeatBounds b = bounds_to_beat(to_beat, budget_bytes, not_after_ms);
  return simulate_timeline(chain, ops, b.above_bytes, b.after_ms);
}

SimResult simulate_to_beat(TimelinePrefix& prefix, const std::vector<Op>& ops, const PlanKey& to_beat,
                           int64_t budget_bytes, double not_after_ms) {
  const BeatBounds b = bounds_to_beat(to_beat, budget_bytes, not_after_ms);
  return prefix.simulate(ops, b.above_bytes, b.after_ms);
}

std::vector<Op> polish_copies(const Chain& chain, int64_t budget_bytes, std::vector<Op> ops,
                              const PolishOptions& options) {
  if (!chain.has_usable_link()) return ops;
  Search s{chain, budget_bytes, std::move(ops), {}, {}, nullptr, false, std::nullopt, options.focus};
  SimResult first = simulate_timeline(chain, s.ops);
  if (!first.valid) return std::move(s.ops);
  // Note [One compute total per search] in polish.h: every move keeps the compute ops.
  s.prefix = std::make_unique<TimelinePrefix>(chain, s.ops, compute_only_ms(chain, s.ops), /*rejoin=*/true);
  s.set(std::move(s.ops), std::move(first));
  for (int pass = 0; pass < options.max_passes; ++pass) {
    if (pass >= options.max_repair_passes && s.over_budget()) break;
    bool any = shift_pass(s, options.window_ops);
    any = drop_pass(s) || any;
    any = wait_pass(s) || any;
    any = round_trip_pass(s, options.window_ops) || any;
    any = recompute_pass(s) || any;
    if (!any) break;
  }
  return std::move(s.ops);
}

}  // namespace memopt::solver

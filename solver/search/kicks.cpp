// kicks.cpp: the search of Note [Kicks out of a local optimum].
#include "solver/search/kicks.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <set>
#include <vector>
#include <utility>

#include "solver/chain/plan_edits.h"
#include "solver/chain/simulate.h"

namespace memopt::solver {
namespace {

// A perturbed plan, and the stage or activation index it perturbs around.
struct Kick {
  std::vector<Op> ops;
  int index = 0;
};

// Note [Round trips added only when reached]
// The search tries the kicks of its plan in one order: first those that change one op
// of it (one_op_kicks_of), then the round trips added (round_trip_kicks_of). Making a
// round trip's kick costs a simulation per place tried, and the search seldom reaches
// them: a kick that wins ends the list, and the wins are nearly always changes of one
// op, which come first. So the round trips' kicks are made only once every change of
// one op has been tried without a win, from the same plan: the same kicks, tried in
// the same order.

// The kicks that change one op of `ops`, in the order the search tries them.
std::vector<Kick> one_op_kicks_of(const Chain& chain, const std::vector<Op>& ops) {
  std::vector<Kick> out;
  const auto loss = std::find(ops.begin(), ops.end(), Op{OpKind::Loss, -1});
  const size_t after_loss = loss == ops.end() ? ops.size() : static_cast<size_t>(loss - ops.begin()) + 1;
  for (size_t p = 0; p < ops.size(); ++p) {
    const Op op = ops[p];
    if (op.kind == OpKind::WaitOffloads || is_offload(op.kind)) {
      // A wait (where the compute op after it is), or a round trip.
      int index = op.index;
      if (op.kind == OpKind::WaitOffloads) {
        const auto next = std::find_if(ops.begin() + static_cast<std::ptrdiff_t>(p), ops.end(),
                                       [](const Op& o) { return info(o.kind).is_compute; });
        index = next == ops.end() ? 0 : next->kind == OpKind::Loss ? chain.length() : next->index;
      }
      out.push_back({dropped(ops, p), index});
    } else if (is_forward(op.kind) && p > after_loss) {
      // A recomputation moved by one or two ops, either way, staying after the loss.
      for (const size_t step : {1, 2}) {
        if (p >= after_loss + step) out.push_back({moved(ops, p, p - step), op.index});
        if (p + step < ops.size()) out.push_back({moved(ops, p, p + step), op.index});
      }
    } else if (op.kind == OpKind::FwdKeep && p < after_loss) {
      // A kept stage checkpointed, and re-run with autograd just before its backward.
      const auto bwd = std::find(ops.begin() + static_cast<std::ptrdiff_t>(p) + 1, ops.end(), Op{OpKind::Bwd, op.index});
      if (bwd == ops.end()) continue;
      std::vector<Op> c = ops;
      c[p].kind = OpKind::FwdCkpt;
      c.insert(c.begin() + (bwd - ops.begin()), op);
      out.push_back({std::move(c), op.index});
    }
  }
  return out;
}

// The kicks that add a round trip to `ops`, each checked by the simulator, in the order
// the search tries them.
std::vector<Kick> round_trip_kicks_of(const Chain& chain, int64_t budget_bytes, const std::vector<Op>& ops,
                                      int window_ops) {
  std::vector<Kick> out;
  // A round trip added: data that does not move yet goes out in the gap after the op
  // that made it or last read it and comes back in one of the `window_ops` places
  // before the op that reads it next; of these, the plan best by the key is the kick
  // (where it is worse than `ops`, a drop in the polish may then pay for it).
  // Note [One compute total per search] in polish.h: a round trip keeps the compute ops.
  TimelinePrefix prefix(chain, ops, compute_only_ms(chain, ops), /*rejoin=*/true);
  const auto round_trip = [&](const RoundTrip& trip) {
    std::optional<std::pair<PlanKey, std::vector<Op>>> best;
    for (size_t off_at = trip.made + 1; off_at <= trip.reader; ++off_at) {
      const std::vector<Op> with_out = inserted(ops, off_at, trip.out);
      for (size_t at = trip.reader + 1, n = 0; at > off_at && n < static_cast<size_t>(window_ops); --at, ++n) {
        std::vector<Op> c = inserted(with_out, at, {way_back(trip.out.kind), trip.out.index});
        const SimResult r = best ? simulate_to_beat(prefix, c, best->first, budget_bytes) : prefix.simulate(c);
        // Note [Refused round trips] in polish.h: refused at the offload, so is every place back.
        if (refused(r) && r.error_op == static_cast<int>(off_at)) break;
        if (!r.valid) continue;
        const PlanKey key = plan_key(r, c, budget_bytes);
        if (!best || key < best->first) best.emplace(key, std::move(c));
      }
      if (info(ops[off_at].kind).is_compute) break;  // the end of the gap
    }
    if (best) out.push_back({std::move(best->second), trip.out.index});
  };
  for (int k = 0; k < chain.length(); ++k)
    if (const auto trip = saved_state_round_trip(chain, ops, k)) round_trip(*trip);
  for (int k = 0; k < chain.length(); ++k)
    for (const RoundTrip& trip : activation_round_trips(chain, ops, k)) round_trip(trip);
  return out;
}

}  // namespace

std::vector<Op> kick_search(const Chain& chain, int64_t budget_bytes, std::vector<Op> ops, const KickOptions& options) {
  if (!chain.has_usable_link()) return ops;
  SimResult sim = simulate_timeline(chain, ops);
  if (!sim.valid) return ops;
  PlanKey best = plan_key(sim, ops, budget_bytes);
  std::set<std::vector<Op>> tried;  // kicked plans already polished (the polish is deterministic)
  int polishes_left = options.max_kick_polishes;
  PolishOptions local = options.polish;
  // Tries `kicks` in turn; true where one ends better (`ops` and `best` are then its).
  const auto try_kicks = [&](std::vector<Kick>& kicks) {
    for (Kick& kick : kicks) {
      if (polishes_left <= 0) return false;
      if (!tried.insert(kick.ops).second || !simulate_timeline(chain, kick.ops).valid) continue;
      --polishes_left;
      // Note [Kicks that cannot be faster] in kicks.h.
      if (best.excess_bytes == 0 && compute_only_ms(chain, kick.ops) > best.time_ms + 1e-9 * std::abs(best.time_ms))
        continue;
      local.focus.assign(chain.length() + 2, 0);
      for (int k = std::max(0, kick.index - options.focus_radius);
           k <= std::min(chain.length() + 1, kick.index + options.focus_radius); ++k)
        local.focus[k] = 1;
      std::vector<Op> polished = polish_copies(chain, budget_bytes, std::move(kick.ops), local);
      const SimResult r = simulate_to_beat(chain, polished, best, budget_bytes);
      if (!r.valid || !(plan_key(r, polished, budget_bytes) < best)) continue;
      // Better: the whole plan is polished again, then kicked again.
      ops = polish_copies(chain, budget_bytes, std::move(polished), options.polish);
      best = plan_key(simulate_timeline(chain, ops), ops, budget_bytes);
      return true;
    }
    return false;
  };
  for (bool improved = true; improved && polishes_left > 0;) {
    std::vector<Kick> kicks = one_op_kicks_of(chain, ops);
    improved = try_kicks(kicks);
    if (improved || polishes_left <= 0) continue;
    kicks = round_trip_kicks_of(chain, budget_bytes, ops, options.polish.window_ops);  // Note [Round trips added only when reached]
    improved = try_kicks(kicks);
  }
  return ops;
}

}  // namespace memopt::solver

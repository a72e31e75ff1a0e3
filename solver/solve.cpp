// solve.cpp: dispatch by solver name, simulate, and explain infeasible budgets.
#include "solver/solve.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>

#include "solver/baselines.h"
#include "solver/budget.h"
#include "solver/coarsen.h"
#include "solver/offload.h"
#include "solver/offload_pipeline.h"
#include "solver/kicks.h"
#include "solver/polish.h"
#include "solver/rotor.h"
#include "solver/simulate.h"
#include "solver/units.h"

namespace memopt::solver {

const SolverKindInfo& info(SolverKind kind) {
  for (const auto& k : kSolverKinds)
    if (k.kind == kind) return k;
  throw std::logic_error("unknown SolverKind");
}

std::optional<SolverKind> solver_kind_from_word(std::string_view word) {
  for (const auto& k : kSolverKinds)
    if (k.word == word) return k.kind;
  return std::nullopt;
}

namespace {

std::optional<std::vector<Op>> solve_optimal(const Chain&, int64_t, const DpOptions&);
std::optional<std::vector<Op>> solve_recompute_only(const Chain&, int64_t, const DpOptions&);

using SolverFn = std::function<std::optional<std::vector<Op>>(const Chain&, int64_t, const DpOptions&)>;

SolverFn solver_fn(SolverKind kind) {
  switch (kind) {
    case SolverKind::Optimal: return solve_optimal;
    case SolverKind::RecomputeOnly: return solve_recompute_only;
    case SolverKind::RotorCompat: return solve_recompute;
    case SolverKind::OffloadAll: return offload_all;
    case SolverKind::StoreAll: return store_all;
    case SolverKind::Sqrt: return sqrt_segments;
    case SolverKind::RecomputeBlocks: return recompute_blocks;
    case SolverKind::RecomputeAll: return recompute_all;
    case SolverKind::Selective: return selective;
    case SolverKind::Pointwise: return pointwise;
  }
  throw std::logic_error("unknown SolverKind");
}

// The most slots a recompute table on `chain` may have (kMaxTableBytes, Note
// [Largest problem] in solve.h).
int64_t max_table_slots(const Chain& chain) {
  const int64_t L = chain.length();
  const int64_t pairs = (L + 1) * (L + 2) / 2;
  return kMaxTableBytes / (pairs * 4) - 1;
}

// The most slots the solver may use on `chain`: the recompute table's limit and, for
// `optimal` over a link, the offload DP's (its states grow as slots + 1).
int64_t max_slots(const Chain& chain, SolverKind kind) {
  int64_t most = max_table_slots(chain);
  if (kind == SolverKind::Optimal && chain.has_usable_link())
    most = std::min(most, kMaxTableBytes / offload_dp_bytes(chain.length(), 0) - 1);
  return most;
}

// Note [Slot rounding slack]
// The DP rounds every resident object up to a slot of budget/slots bytes, so at a
// peak where n objects are resident it may overcount by up to n slots and refuse a
// plan whose exact peak fits -- an operator-level chain holds eight times as many
// objects as a block-level one, and loses the most. So the table runs on past the
// budget in slots of the same size (Note [A table past its budget] in rotor.h), up to
// the most that rounding can have cost (a slot per object the recurrence may hold:
// 2L + 4) and at most a quarter more, and the plan at every memory from the nominal
// root up (each distinct value once) is simulated exactly: the fastest whose exact
// peak fits the budget is a candidate. Every candidate is checked by the simulator, so
// none over-runs, and the plain DP's own plan stays a candidate, so this never loses.
// The plain DP's plan is read from the same table at the nominal root: one fill gives
// both.
struct RecomputePlans {
  std::optional<std::vector<Op>> at_budget;   // the recompute DP's plan (solve_recompute's)
  std::optional<std::vector<Op>> with_slack;  // the fastest that fits from the slack
};

RecomputePlans recompute_plans(const Chain& chain, int64_t budget_bytes, const DpOptions& dp, bool want_at_budget) {
  RecomputePlans plans;
  if (budget_bytes <= 0 || dp.slots <= 0) return plans;
  const int64_t L = chain.length();
  const int64_t slack = dp.rotor_compat ? 0 : std::min({2 * L + 4, int64_t{dp.slots} / 4, max_table_slots(chain) - dp.slots});
  if (slack <= 0 && !want_at_budget) return plans;
  const RecomputeTable table(chain, budget_bytes, dp, std::max<int64_t>(slack, 0));
  const int64_t root = dp.slots - table.x_slots(0);
  if (want_at_budget && root >= 0 && table.value(0, L, root) < RecomputeTable::kInfinity) {
    plans.at_budget.emplace();
    table.emit(0, static_cast<int>(L), root, *plans.at_budget);
  }
  if (slack <= 0) return plans;
  double best_ms = 0;
  int64_t last_value = RecomputeTable::kInfinity;
  for (int64_t m = std::max<int64_t>(root, 0); m <= table.slots() - table.x_slots(0); ++m) {
    const int64_t v = table.value(0, L, m);
    if (v >= last_value) continue;  // the same plan's time as a smaller m: seen
    last_value = v;
    std::vector<Op> ops;
    table.emit(0, static_cast<int>(L), m, ops);
    const SimResult r = simulate_timeline(chain, ops);
    if (!fits(r, budget_bytes)) continue;
    if (!plans.with_slack || r.time_ms < best_ms) {
      plans.with_slack = std::move(ops);
      best_ms = r.time_ms;
    }
  }
  return plans;
}

// The fastest candidate that fits, by simulated time; the first among equals.
std::optional<std::vector<Op>> fastest_fitting(const Chain& chain, int64_t budget_bytes,
                                               std::vector<std::optional<std::vector<Op>>> candidates) {
  std::optional<std::vector<Op>> best;
  double best_ms = 0;
  for (auto& c : candidates) {
    if (!c) continue;
    const SimResult r = simulate_timeline(chain, *c);
    if (!fits(r, budget_bytes)) continue;
    if (!best || r.time_ms < best_ms) { best = std::move(c); best_ms = r.time_ms; }
  }
  return best;
}

// Note [Each plan polished once]
// `optimal` runs its search from several classes (Note [Classes to start from]), and
// their DPs often return the same plan at a budget, at the budget itself or at the
// larger budgets of the starts; the same polished plan then yields the same starts
// that keep a stage. The polish is deterministic, so each distinct plan is polished
// once per solve and its result reused: the same answer at a fraction of the cost
// where the classes agree.
class Polisher {
 public:
  Polisher(const Chain& chain, int64_t budget_bytes) : chain_(chain), budget_bytes_(budget_bytes) {}
  std::vector<Op> operator()(const std::vector<Op>& ops) {
    const auto done = polished_.find(ops);
    if (done != polished_.end()) return done->second;
    return polished_.emplace(ops, polish_copies(chain_, budget_bytes_, ops)).first->second;
  }

 private:
  const Chain& chain_;
  int64_t budget_bytes_;
  std::map<std::vector<Op>, std::vector<Op>> polished_;
};

// What the searches of one solve share (Notes [Each plan polished once], [Classes to
// start from], and [The DP's memory kept between solves] in offload.h).
struct Searches {
  Polisher polish;
  OffloadDpMemory dp_memory;
  bool dp_waited_after_a_kept_run = false;  // some plan of the offload DP so far did
  std::optional<std::vector<Op>> offload_dp(const Chain& chain, int64_t budget_bytes, const DpOptions& dp) {
    std::optional<std::vector<Op>> plan = solve_offload(chain, budget_bytes, dp, &dp_memory);
    if (plan && has_waiting_kept_run(*plan)) dp_waited_after_a_kept_run = true;
    return plan;
  }
};

// Note [Known plans]
// The DPs' plans get faster as the budget grows, up to slot rounding; the polish of
// Note [Polishing a plan's copies] (polish.h) is a local search and need not: from
// the DP's plan at a smaller budget it may reach a plan faster than the one it
// reaches from the DP's plan at a larger budget. A plan that fits a smaller budget
// fits every larger one, so a caller solving a series of budgets (`memopt tradeoff`)
// hands `optimal` the plans it found below; after the polish, each that fits is
// simulated, and one faster than the polished plan is polished and returned instead.
// A single `memopt solve` has no such plans, so it may return a plan slower than the
// one it would return at a smaller budget; a sweep never does.

// Note [Starts over the budget]
// The offload DP's plan at a larger budget, S + f·(store-all peak − S) for f = 1/8,
// 2/8 and 3/8, keeps more than its plan at S and recomputes less; repaired with
// copies (Note [Repairing a plan over the budget] in polish.h) it often fits S and
// beats the polished plan of S, because the DP's class cannot place the copies that
// make it fit. Each such plan (each distinct one once) is polished down to S and
// becomes a candidate if it fits. The larger budget gets proportionally more slots,
// at most twice as many (and within kMaxTableBytes), so that its slots are not much
// coarser than the nominal ones. Each start costs a DP and a polish, so:
//  - when the best candidate already takes the least time any plan can
//    (sum_fwd_bwd_ms: every op once, no stall), nothing can beat it: no start runs;
//  - a start that cannot be repaired ends the series: the next one is further over.
// Fractions up to 7/8 close a few more of the oracle test's budgets at more than
// twice the time; store-all as a start never won on the GPT-2 profiles of results/.
std::vector<std::optional<std::vector<Op>>> starts_over_budget(const Chain& chain, int64_t budget_bytes,
                                                               const DpOptions& dp, Searches& searches) {
  std::vector<std::optional<std::vector<Op>>> repaired;
  if (!chain.has_usable_link() || budget_bytes <= 0 || dp.slots <= 0) return repaired;
  const int64_t store_all = store_all_peak_bytes(chain);
  std::vector<std::vector<Op>> seen;
  for (const int eighths : {1, 2, 3}) {
    const int64_t larger = budget_bytes + (store_all - budget_bytes) * eighths / 8;
    if (larger <= budget_bytes) break;
    const auto same_slot_size = static_cast<int64_t>(static_cast<__int128>(dp.slots) * larger / budget_bytes);
    DpOptions wide = dp;
    wide.slots =
        static_cast<int>(std::min({same_slot_size, 2 * int64_t{dp.slots}, larger, max_slots(chain, SolverKind::Optimal)}));
    std::optional<std::vector<Op>> plan = searches.offload_dp(chain, larger, wide);
    if (!plan || std::find(seen.begin(), seen.end(), *plan) != seen.end()) continue;
    seen.push_back(*plan);
    repaired.push_back(searches.polish(*plan));
    if (!fits(simulate_timeline(chain, *repaired.back()), budget_bytes)) break;  // a larger one is further over
  }
  return repaired;
}

// Note [Starts that keep a recomputed stage]
// On small chains the fastest plan of the whole vocabulary (tests/solver/
// exhaustive_oracle.h) often keeps a stage that the best candidate recomputes, and
// pays for the room with copies the DP's class cannot place: a saved state offloaded
// and brought back inside a later recomputed segment, an offload issued ops after its
// data exists, a wait two items on. So `optimal` also starts from its best plan with
// one recomputed stage kept instead: the stage's forward before the loss becomes
// fwd_keep and its forwards after the loss go. Such a plan is faster and usually
// over the budget; the polish repairs it (Note [Repairing a plan over the budget] in
// polish.h) and it is a candidate if it then fits. A plan the simulator refuses (a
// later op read what a removed forward made) or that is no faster is not a start.
// Each start costs a polish, so only the kKeptStageStarts that gain the most time
// per byte over the budget are tried, and, as for the starts over the budget, none
// when the best plan already takes sum_fwd_bwd_ms. On the oracle test's chains (up to
// 4 stages, 215 budgets) these starts cut the budgets where `optimal` is slower than
// the fastest valid plan from 10 to 5; the first start alone does as much.
constexpr size_t kKeptStageStarts = 2;

std::vector<std::optional<std::vector<Op>>> starts_keeping_a_stage(const Chain& chain, int64_t budget_bytes,
                                                                   const std::vector<Op>& best, Polisher& polish) {
  struct Start {
    double ms_per_byte;
    std::vector<Op> ops;
  };
  std::vector<Start> starts;
  const auto loss = std::find(best.begin(), best.end(), Op{OpKind::Loss, -1});
  const double best_ms = simulate_timeline(chain, best).time_ms;
  const auto forward = [](const Op& op) { return is_forward(op.kind); };
  for (auto first = best.begin(); first != loss; ++first) {
    if (first->kind != OpKind::FwdCkpt && first->kind != OpKind::FwdDrop) continue;
    const int k = first->index;
    std::vector<Op> ops;
    for (auto op = best.begin(); op != best.end(); ++op) {
      if (op == first) ops.push_back({OpKind::FwdKeep, k});
      else if (!(op > loss && forward(*op) && op->index == k)) ops.push_back(*op);
    }
    const SimResult r = simulate_timeline(chain, ops);
    if (!r.valid || r.time_ms >= best_ms) continue;
    const double over = static_cast<double>(std::max<int64_t>(1, r.peak_bytes - budget_bytes));
    starts.push_back({(best_ms - r.time_ms) / over, std::move(ops)});
  }
  std::stable_sort(starts.begin(), starts.end(),
                   [](const Start& a, const Start& b) { return a.ms_per_byte > b.ms_per_byte; });
  if (starts.size() > kKeptStageStarts) starts.resize(kKeptStageStarts);
  std::vector<std::optional<std::vector<Op>>> repaired;
  for (const Start& start : starts) repaired.push_back(polish(start.ops));
  return repaired;
}

// Note [Optimal takes the best of everything]
// The DPs work in slots, which round every size up, so a baseline that fits in
// bytes can beat the DP's schedule (store-all at a budget of exactly its peak is the
// usual case), and offload-all and the pipelined family (Note [Pipelined offload
// candidates] in offload_pipeline.h) lie outside the offload DP's class. `optimal` and
// `recompute-only` therefore also simulate the baselines they may use and return
// the fastest schedule that fits: never worse than any of them, as users expect.
// The recompute DP with slack (Note [Slot rounding slack]) is one more candidate.
// `optimal` then polishes the fastest (Note [Polishing a plan's copies] in polish.h),
// holds it against the DP's plans at larger budgets repaired down to this one (Note
// [Starts over the budget]), against itself with a recomputed stage kept and repaired
// (Note [Starts that keep a recomputed stage]) and against the plans its caller knows
// (Note [Known plans]); it does all but the last from each of the offload DP's
// classes (Note [Classes to start from]), and kicks the fastest of those out of the
// polish's local optimum (Note [Kicks out of a local optimum] in kicks.h).
//
// Note [Classes to start from]
// The polish and the repairs are local searches, and where they end depends on where
// they start. Each wider class of the offload DP (OffloadShapes in rotor.h) finds
// plans at least as fast at every budget, but they keep the link busier, and
// repaired down from a larger budget they may leave the repair less room: on the
// GPT-2 small profile of results/2026-11-24-offload-emulated-cpu over the V100's
// PCIe 3 link at 20% of store-all, the windowed class's plan at S + (P - S)/8
// repairs down to S at 2221.1 ms with no time lost, the class with recomputed runs'
// (2139.3 ms before) only at 2370.7. On the 128 points of the GPT-2 link reports,
// every widening made some points slower when its class replaced the one before it
// as a start (17 for the copies through a kept run, 4 more for the runs that end
// waiting), and faster at others. So `optimal` runs its whole search from the
// widest class's plans and from those of the three narrowest, and takes the fastest
// (the wider on a tie): never slower than any of them alone. The class between, with
// runs that end waiting but no kept item that moves its input, is not a start of its
// own: on the oracle's small chains the four starts reach its plans' times. The
// second class's search runs only where a plan of the widest class's search ends a
// kept run waiting. Where none does and none moves a kept input either, it would
// return the very same plans (its transitions are the others, in the same order, and
// none of the widest class's chosen ones is missing; `OffloadDp.WithoutTheWidest
// ShapesItsPlanIsTheNarrowerClasssPlan` checks it); where plans move kept inputs, it
// is skipped too, to save a fourth search: running it there changed no result on the
// oracle's small chains nor on the twelve GPT-2 small link reports of
// results/2026-11-27-kept-input-items-op-links. So is every search once
// the plan so far takes sum_fwd_bwd_ms, which nothing can beat. Otherwise `optimal`
// costs four searches, each about one class's DPs and polishes (a plan two classes
// share is polished once).

// Whether `plan` already takes sum_fwd_bwd_ms, every op once with no stall, which no
// plan can beat: then no start need run.
bool unbeatable(const Chain& chain, const std::optional<std::vector<Op>>& plan) {
  return plan && simulate_timeline(chain, *plan).time_ms <= sum_fwd_bwd_ms(chain);
}

// `candidates` holds an empty place at `dp_place` for the offload DP's plan.
std::optional<std::vector<Op>> best_from_one_class(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                                   std::vector<std::optional<std::vector<Op>>> candidates,
                                                   size_t dp_place, Searches& searches) {
  candidates[dp_place] = searches.offload_dp(chain, budget_bytes, dp);
  std::optional<std::vector<Op>> best = fastest_fitting(chain, budget_bytes, std::move(candidates));
  if (best) best = searches.polish(*best);
  if (!unbeatable(chain, best)) {
    std::vector<std::optional<std::vector<Op>>> finalists = starts_over_budget(chain, budget_bytes, dp, searches);
    if (best)
      for (auto& start : starts_keeping_a_stage(chain, budget_bytes, *best, searches.polish))
        finalists.push_back(std::move(start));
    finalists.insert(finalists.begin(), std::move(best));  // first: it wins ties
    best = fastest_fitting(chain, budget_bytes, std::move(finalists));
  }
  return best;
}

std::optional<std::vector<Op>> best_of(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                       bool with_offload, const std::vector<std::vector<Op>>& known = {});

// Note [Known plans from the blocks]
// Where the stages' names group them into blocks (block_of in coarsen.h), `optimal`
// also solves the chain of the blocks, built from this chain's own numbers, at the
// same budget, writes that plan out on the stages (Note [Plans made for the blocks] in
// coarsen.h), and polishes it here: the polish repairs it when the written-out plan
// holds more than the block chain said (Note [Repairing a plan over the budget] in
// polish.h). It is a candidate like the others, so where it fits, `optimal` on the
// stages is never slower than `optimal` on the blocks made of them. The chain of
// blocks has no two stages of one block, so its own solve does not recurse. Where the
// best plan already takes sum_fwd_bwd_ms, or there is no link (the recompute DP is
// exact over every plan the blocks can make), it is not tried.
//
// The written-out plan moves everything the block plan moves (the stages' own bytes,
// ending carries and saved states: Note [Carried bytes may leave] in simulate.h), but
// bytes carried into a block from before it stay on the device, as on the chain of
// blocks, and so may an ending carry that mixes them with the block's own: then it
// can hold more than the block plan did. So when it is over the budget by E bytes, the blocks are solved again at their plan's peak less
// E, up to kBlockBudgets times, until a written-out plan fits. The first plan and the
// last are polished (the polish repairs the first, and at times it then beats the
// one that fits) and both are candidates. They come after the kicks (kicks.h), so
// that `optimal` on named stages is never slower than on the same stages unnamed, and
// each that fits is kicked in turn: on GPT-2 small over 400 GB/s at 6.07 GiB, the
// repaired first plan goes from 41.861 to 39.657 ms, below the blocks' own 39.816.
//
// The first block plan is also written out without its ending-carry moves, polished
// and kicked as one more candidate. Moving a carry frees memory for link time, and
// where the link is the bottleneck the searches can find a faster plan from the one
// that leaves the carries in place: on GPT-2 small over 400 GB/s at 8.09 GiB, 36.791
// ms from it against 37.128 from the plan that moves them.
constexpr int kBlockBudgets = 4;

std::vector<std::optional<std::vector<Op>>> plans_of_the_blocks(const Chain& chain, int64_t budget_bytes,
                                                                const DpOptions& dp, Polisher& polish) {
  std::vector<std::optional<std::vector<Op>>> polished;
  size_t firsts = 0;
  const std::optional<Coarsening> blocks = coarsen_by_name(chain);
  if (!blocks) return polished;
  int64_t blocks_budget = budget_bytes;
  for (int attempt = 0; attempt < kBlockBudgets && blocks_budget > 0; ++attempt) {
    const std::optional<std::vector<Op>> plan = best_of(blocks->chain, blocks_budget, dp, /*with_offload=*/true);
    if (!plan) break;
    std::vector<Op> ops = write_out(chain, *blocks, *plan);
    const SimResult r = simulate_timeline(chain, ops);
    if (!r.valid) break;
    if (attempt == 0) {
      std::vector<Op> carries_stay;
      std::copy_if(ops.begin(), ops.end(), std::back_inserter(carries_stay), [](const Op& op) {
        return op.kind != OpKind::OffloadCarried && op.kind != OpKind::PrefetchCarried;
      });
      if (carries_stay.size() != ops.size()) polished.push_back(polish(carries_stay));
    }
    polished.push_back(polish(ops));
    if (attempt == 0) firsts = polished.size();
    if (fits(r, budget_bytes)) break;
    const int64_t blocks_peak = simulate_timeline(blocks->chain, *plan).peak_bytes;
    blocks_budget = std::min(blocks_budget, blocks_peak) - (r.peak_bytes - budget_bytes);
  }
  // The first block plan's (one or two) and the last one's.
  if (polished.size() > firsts + 1)
    polished.erase(polished.begin() + static_cast<std::ptrdiff_t>(firsts), polished.end() - 1);
  return polished;
}

std::optional<std::vector<Op>> best_of(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                       bool with_offload, const std::vector<std::vector<Op>>& known) {
  // Baselines first: on a tie in predicted time the simpler plan wins (store-all
  // rather than a DP plan that moves data for nothing).
  std::vector<std::optional<std::vector<Op>>> candidates;
  for (auto* baseline : {&store_all, &sqrt_segments, &recompute_blocks, &recompute_all, &selective, &pointwise})
    candidates.push_back((*baseline)(chain, budget_bytes, dp));
  const size_t dp_place = candidates.size();
  // The offload DP counts carried bytes twice (Note [Carried bytes] in chain.h): its
  // plans fit but may be slower than the recompute DP's, which counts them exactly.
  RecomputePlans recompute = recompute_plans(chain, budget_bytes, dp, !with_offload || chain.carries());
  if (with_offload) candidates.push_back(std::nullopt);
  candidates.push_back(std::move(recompute.at_budget));
  candidates.push_back(std::move(recompute.with_slack));
  if (with_offload && chain.link) {
    candidates.push_back(offload_all(chain, budget_bytes, dp));
    candidates.push_back(solve_offload_pipeline(chain, budget_bytes, dp));
  }
  if (!with_offload) return fastest_fitting(chain, budget_bytes, std::move(candidates));
  std::optional<std::vector<Op>> best;
  Searches searches{Polisher(chain, budget_bytes), {}};
  if (chain.has_usable_link()) {
    for (const OffloadShapes shapes :
         {OffloadShapes::MovingKeptInputs, OffloadShapes::ThroughKeptRuns, OffloadShapes::ThroughRecomputation,
          OffloadShapes::Windowed}) {
      if (unbeatable(chain, best)) break;
      // Only where a plan of the widest class's search ends a kept run waiting (Note
      // [Classes to start from]).
      if (shapes == OffloadShapes::ThroughKeptRuns && !searches.dp_waited_after_a_kept_run) continue;
      DpOptions one_class = dp;
      one_class.offload_shapes = shapes;
      best = fastest_fitting(chain, budget_bytes,
                             {std::move(best), best_from_one_class(chain, budget_bytes, one_class, candidates, dp_place, searches)});
    }
    if (best && !unbeatable(chain, best)) best = kick_search(chain, budget_bytes, *best);
    if (!unbeatable(chain, best)) {
      std::vector<std::optional<std::vector<Op>>> finalists = plans_of_the_blocks(chain, budget_bytes, dp, searches.polish);
      for (auto& plan : finalists)
        if (plan && fits(simulate_timeline(chain, *plan), budget_bytes) && !unbeatable(chain, plan))
          plan = kick_search(chain, budget_bytes, *plan);
      finalists.insert(finalists.begin(), std::move(best));  // first: it wins ties
      best = fastest_fitting(chain, budget_bytes, std::move(finalists));
    }
  } else {
    best = best_from_one_class(chain, budget_bytes, dp, std::move(candidates), dp_place, searches);  // the recompute DP
  }
  if (known.empty()) return best;
  std::vector<std::optional<std::vector<Op>>> against{best};
  against.insert(against.end(), known.begin(), known.end());
  std::optional<std::vector<Op>> winner = fastest_fitting(chain, budget_bytes, std::move(against));
  if (!winner || winner == best) return winner;
  return searches.polish(*winner);
}

std::optional<std::vector<Op>> solve_optimal(const Chain& chain, int64_t budget_bytes, const DpOptions& dp) {
  return best_of(chain, budget_bytes, dp, /*with_offload=*/true);
}
std::optional<std::vector<Op>> solve_recompute_only(const Chain& chain, int64_t budget_bytes, const DpOptions& dp) {
  return best_of(chain, budget_bytes, dp, /*with_offload=*/false);
}

DpOptions dp_options(const SolveOptions& o) {
  return {o.slots, o.solver == SolverKind::RotorCompat, o.num_threads};
}

bool solves(const Chain& chain, const SolveOptions& o, int64_t budget_bytes) {
  return solver_fn(o.solver)(chain, budget_bytes, dp_options(o)).has_value();
}

bool uses_dp(SolverKind kind) {
  return kind == SolverKind::Optimal || kind == SolverKind::RecomputeOnly || kind == SolverKind::RotorCompat;
}

}  // namespace

std::string solver_needs(SolverKind kind, const Chain& chain) {
  if (kind == SolverKind::OffloadAll && !chain.link)
    return "offload-all needs the host<->device bandwidth, but the profile has no `link`";
  const auto needs_role = [&](StageRole role) -> std::string {
    if (chain.has_role(role)) return "";
    return std::string(info(kind).word) + " recomputes the stages whose role is " + role_word(role) +
           ", and the profile marks none; make the profile at operator granularity (--granularity op)";
  };
  if (kind == SolverKind::Selective) return needs_role(StageRole::AttentionCore);
  if (kind == SolverKind::Pointwise) return needs_role(StageRole::Pointwise);
  return "";
}

std::string check_problem_size(const Chain& chain, const SolveOptions& options) {
  const int64_t L = chain.length();
  if (L > kMaxStages)
    return "/stages: the chain has " + std::to_string(L) + " stages, more than memopt solves (at most " +
           std::to_string(kMaxStages) + "; the DP's time grows as L³, so " + std::to_string(L) +
           " stages would take far too long -- Note [Largest problem] in solver/solve.h); merge consecutive "
           "stages into larger ones, e.g. profile with `memopt profile --granularity block`";
  if (!uses_dp(options.solver) || options.slots < 1) return "";
  const int64_t pairs = (L + 1) * (L + 2) / 2;
  const int64_t table_bytes = pairs * (int64_t{options.slots} + 1) * 4;
  const bool offload_dp = options.solver == SolverKind::Optimal && chain.has_usable_link();
  const int64_t states_bytes = offload_dp ? offload_dp_bytes(chain.length(), options.slots) : 0;
  if (table_bytes > kMaxTableBytes || states_bytes > kMaxTableBytes) {
    const std::string what = table_bytes > kMaxTableBytes ? "the DP table" : "the offload DP's states";
    return what + " of " + std::to_string(options.slots) + " slots on " + std::to_string(L) + " stages needs " +
           format_bytes(std::max(table_bytes, states_bytes)) + ", more than the " + format_bytes(kMaxTableBytes) +
           " memopt allows; use " + std::to_string(max_slots(chain, options.solver)) +
           " slots or fewer (the default is " + std::to_string(SolveOptions{}.slots) + ")";
  }
  return "";
}

int64_t min_feasible_budget(const Chain& chain, const SolveOptions& options) {
  if (std::string e = check_problem_size(chain, options); !e.empty()) throw ProblemTooLarge(e);
  const int64_t store_all_peak = store_all_peak_bytes(chain);
  // Slot rounding can make the DP miss at exactly the store-all peak; look upwards.
  int64_t hi = std::max<int64_t>(store_all_peak, 1);
  int doublings = 0;
  while (!solves(chain, options, hi)) {
    if (++doublings > 8) return -1;
    hi *= 2;
  }
  // Feasibility is monotone in the budget: a larger budget rounds every size to
  // the same or fewer slots, and every DP condition is monotone in the sizes.
  int64_t lo = 0;  // infeasible: nothing fits in zero bytes
  while (hi - lo > std::max<int64_t>(1, hi / 100000)) {
    const int64_t mid = lo + (hi - lo) / 2;
    (solves(chain, options, mid) ? hi : lo) = mid;
  }
  return hi;
}

Schedule solve(const Chain& chain, const SolveOptions& options) {
  if (std::string e = validate(chain); !e.empty()) throw std::invalid_argument("invalid chain: " + e);
  if (std::string e = check_problem_size(chain, options); !e.empty()) throw ProblemTooLarge(e);
  if (options.budget_bytes <= 0) throw std::invalid_argument("the budget must be positive");
  if (std::string e = solver_needs(options.solver, chain); !e.empty()) throw std::invalid_argument(e);
  const auto ops = options.solver == SolverKind::Optimal
                       ? best_of(chain, options.budget_bytes, dp_options(options), true, options.known_plans)
                       : solver_fn(options.solver)(chain, options.budget_bytes, dp_options(options));
  const std::string_view name = info(options.solver).word;
  if (!ops) {
    const int64_t store_all_peak = store_all_peak_bytes(chain);
    const int64_t min_budget = options.find_min_budget ? min_feasible_budget(chain, options) : -1;
    std::string msg = "no " + std::string(name) + " schedule fits a budget of " +
                      format_bytes(options.budget_bytes) + " (" + std::to_string(options.budget_bytes) + " B). ";
    if (min_budget > 0)
      msg += "The smallest budget that works is " + format_bytes(min_budget) + " (" + std::to_string(min_budget) +
             " B): solve for at least that";
    else if (options.find_min_budget)
      msg += "No budget up to 256x the store-all peak works";
    msg += "; storing everything peaks at " + format_bytes(store_all_peak) + " (" + std::to_string(store_all_peak) + " B).";
    throw InfeasibleBudget(msg, min_budget, store_all_peak);
  }
  const SimResult sim = simulate_timeline(chain, *ops);
  if (!sim.valid)
    throw std::logic_error("bug: solver " + std::string(name) + " returned an invalid schedule: " + sim.error);
  if (sim.peak_bytes > options.budget_bytes) {
    const std::string over = "solver " + std::string(name) + " returned a schedule peaking at " +
                             std::to_string(sim.peak_bytes) + " B, over the budget of " +
                             std::to_string(options.budget_bytes) + " B";
    // rotor's recurrence is known to do this (docs/formats.md section 6.8); ours never may.
    if (options.solver == SolverKind::RotorCompat)
      throw std::runtime_error(over + ": rotor's published recurrence checks the wrong gradient in its keep branch; use the "
                               "optimal solver");
    throw std::logic_error("bug: " + over);
  }
  Schedule s;
  s.solver = std::string(name);
  s.budget_bytes = options.budget_bytes;
  s.chain_length = chain.length();
  s.predicted = {sim.peak_bytes, sim.time_ms};
  s.ops = *ops;
  return s;
}

}  // namespace memopt::solver

// optimal.cpp: `optimal` and `recompute-only` -- the candidates, the search over the
// offload DP's classes and its starts, the kicks, the plans of the blocks and the
// known plans, in the order plan_optimal lists them (docs/solver.md).
#include "solver/search/optimal.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <tuple>
#include <memory>

#include "solver/dp/baselines.h"
#include "solver/chain/coarsen.h"
#include "solver/dp/limits.h"
#include "solver/dp/offload.h"
#include "solver/dp/offload_pipeline.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "solver/search/side_by_side.h"
#include "solver/search/table_shelf.h"

namespace memopt::solver {
namespace {

using Plan = std::optional<std::vector<Op>>;
using Plans = std::vector<Plan>;

// Note [Slot rounding slack]
// The DP rounds every resident object up to a slot of budget/slots bytes, so at a
// peak where n objects are resident it may overcount by up to n slots and refuse a
// plan whose exact peak fits -- an operator-level chain holds eight times as many
// objects as a block-level one, and loses the most. So the table runs on past the
// budget in slots of the same size (Note [A table past its budget] in rotor.h), up to
// the most that rounding can have cost (a slot per object the recurrence may hold:
// 2L + 4) and at most a quarter more (SearchOptions' slack_* fields), and the plan at
// every memory from the nominal root up (each distinct value once) is simulated
// exactly: the fastest whose exact peak fits the budget is a candidate. Every candidate is checked by the simulator, so
// none over-runs, and the plain DP's own plan stays a candidate, so this never loses.
// The plain DP's plan is read from the same table at the nominal root: one fill gives
// both.
struct RecomputePlans {
  std::optional<std::vector<Op>> at_budget;   // the recompute DP's plan (solve_recompute's)
  std::optional<std::vector<Op>> with_slack;  // the fastest that fits from the slack
};

int64_t slack_slots(const Chain& chain, const DpOptions& dp, const SearchOptions& search) {
  const int64_t L = chain.length();
  return dp.rotor_compat ? 0
                         : std::min({search.slack_slots_per_stage * L + search.slack_slots_fixed,
                                     int64_t{dp.slots} / search.slack_most_divisor,
                                     max_recompute_table_slots(chain) - dp.slots});
}

// `table`: the recompute table at the budget, with slack_slots past it.
RecomputePlans recompute_plans(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                               const SearchOptions& search, const RecomputeTable& table, bool want_at_budget) {
  RecomputePlans plans;
  if (budget_bytes <= 0 || dp.slots <= 0) return plans;
  const int64_t L = chain.length();
  const int64_t slack = slack_slots(chain, dp, search);
  if (slack <= 0 && !want_at_budget) return plans;
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
    const SimResult r = simulate_timeline(chain, ops, budget_bytes);
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
    const SimResult r = simulate_timeline(chain, *c, budget_bytes);
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
  Polisher(const Chain& chain, int64_t budget_bytes, const PolishOptions& options)
      : chain_(chain), budget_bytes_(budget_bytes), options_(options) {}
  // Safe to call from the threads of Note [Searches side by side]: two that polish
  // the same plan at once both compute it, and the answers are equal.
  std::vector<Op> operator()(const std::vector<Op>& ops) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto done = polished_.find(ops);
      if (done != polished_.end()) return done->second;
    }
    std::vector<Op> polished = polish_copies(chain_, budget_bytes_, ops, options_);
    const std::lock_guard<std::mutex> lock(mutex_);
    return polished_.emplace(ops, std::move(polished)).first->second;
  }

 private:
  const Chain& chain_;
  int64_t budget_bytes_;
  PolishOptions options_;
  std::mutex mutex_;
  std::map<std::vector<Op>, std::vector<Op>> polished_;
};

// Note [The starts' tables shared by the classes]
// Each class's search runs the offload DP at the budgets of Note [Starts over the
// budget], and the DP prices subchains with the recompute table of the budget, which
// depends only on the budget, the slots and the recurrence's variant (not on the
// class): filling it costs more than the DP that reads it at operator granularity.
// So the classes' searches share the table of each start through a shelf of their own
// (Note [Tables shared between solves] in table_shelf.h): the first to need it fills
// it, and the others, on this thread or beside it, wait for it and read it. The shelf
// lives until every class's search has ended.

// The most slots of a start over the budget (Note [Starts over the budget]).
int64_t most_start_slots(const Chain& chain, int slots, const SearchOptions& options) {
  return std::min(options.over_budget_slot_factor * int64_t{slots}, max_optimal_slots(chain));
}

// Note [The DPs' memories lent out]
// The offload DP keeps its tables' pages from one solve to the next in the memory it
// is given (Note [The DP's memory kept between solves] in offload.h). Each class's
// search had a memory of its own, so every search had the kernel map and zero pages
// for its tables afresh, and a start over the budget, with more slots than the DP
// before it, outgrew the memory and mapped its pages again: on block-dominated chains
// over a slow link, whose DPs reach most of their rows, those page faults took a
// large part of `optimal`'s processor time. So the searches of one `optimal` lend memories from one pool instead: a DP
// takes one that no other DP is using and gives it back when it ends, so there are
// never more memories than DPs running at once (one per thread), and each keeps its
// pages from one DP to the next, whichever search runs it. A memory is reserved, when
// lent, for the most slots any DP of the search may have (the starts', at most
// SearchOptions::over_budget_slot_factor times the nominal slots), which maps nothing
// but means no DP of the search outgrows it. The solve of the chain of blocks (Note
// [Known plans from the blocks]) lends its DPs memories from the same pool: its
// chain is shorter, so a memory of the stages' search holds its tables in pages
// already mapped. The DP's result does not depend on what a memory held before (the
// same Note), so the plans are the same.
class DpMemories {
 public:
  std::unique_ptr<OffloadDpMemory> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.empty()) return std::make_unique<OffloadDpMemory>();
    std::unique_ptr<OffloadDpMemory> memory = std::move(idle_.back());  // the one given back last
    idle_.pop_back();
    return memory;
  }
  void give_back(std::unique_ptr<OffloadDpMemory> memory) {
    const std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(memory));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<OffloadDpMemory>> idle_;
};

// What the stages of one search share: the problem, the options, and Notes [Each
// plan polished once], [Classes to start from] and [The DPs' memories lent out].
// Note [One recompute table at the budget]
// The recompute DP with its slack (Note [Slot rounding slack]), the pipelined family and
// each class's offload DP at the budget all price subchains with the recompute table
// of the same budget and slots, and the slack's table holds every value of the
// others' (Note [A table past its budget] in rotor.h). At operator granularity
// filling it is a large part of a solve, so the search fills it once, when first
// needed, and hands it to each of them; where the caller gives a shelf (Note [Tables
// shared between solves] in table_shelf.h), from there, so that `recompute-only` at the
// same budget reads the same table.
struct Search {
  const Chain& chain;
  int64_t budget_bytes;
  DpOptions dp;
  const SearchOptions& options;
  std::shared_ptr<Polisher> polisher;  // shared with the searches beside this one
  std::shared_ptr<DpMemories> dp_memories;  // likewise
  bool dp_waited_after_a_kept_run = false;  // some plan of the offload DP so far did
  bool stopped_a_series = false;  // starts_over_budget skipped starts (Note [Starts over the budget])
  mutable std::shared_ptr<const RecomputeTable> at_budget;  // Note [One recompute table at the budget]
  RecomputeTableShelf* shelf = nullptr;  // the caller's, for the table at the budget; may be null
  std::shared_ptr<RecomputeTableShelf> start_tables;  // Note [The starts' tables shared by the classes], while they run
  // The answers of this search's offload DPs so far (Note [An answer known in advance]
  // in offload.h); a search runs on one thread at a time.
  struct Answered {
    int64_t budget_bytes;
    int slots;
    OffloadShapes shapes;
    bool rotor_compat;
    int64_t units;
  };
  std::vector<Answered> answered;

  Search(const Chain& c, int64_t budget, const DpOptions& d, const SearchOptions& o,
         RecomputeTableShelf* tables = nullptr, std::shared_ptr<DpMemories> memories = nullptr)
      : chain(c),
        budget_bytes(budget),
        dp(d),
        options(o),
        polisher(std::make_shared<Polisher>(c, budget, o.polish)),
        dp_memories(memories ? std::move(memories) : std::make_shared<DpMemories>()),
        shelf(tables) {}
  // A search of the same problem for another thread (Note [Searches side by side] in
  // side_by_side.h): main's polished plans, DP memories and table (filled there first,
  // if it is not yet), and `threads` for the DPs it runs inside.
  Search(const Search& main, int threads) : Search(main.chain, main.budget_bytes, main.dp, main.options, main.shelf) {
    polisher = main.polisher;
    dp_memories = main.dp_memories;
    start_tables = main.start_tables;
    dp.num_threads = threads;
    if (budget_bytes > 0 && dp.slots > 0) at_budget = main.table_shared();
  }
  // Only for budget_bytes and dp.slots, and both positive.
  const RecomputeTable& table() const { return *table_shared(); }
  std::vector<Op> polish(const std::vector<Op>& ops) { return (*polisher)(ops); }
  const std::shared_ptr<const RecomputeTable>& table_shared() const {
    if (!at_budget) {
      const int64_t slack = std::max<int64_t>(slack_slots(chain, dp, options), 0);
      at_budget = shelf ? shelf->get(chain, budget_bytes, dp, slack)
                        : std::make_shared<const RecomputeTable>(chain, budget_bytes, dp, slack);
    }
    return at_budget;
  }
  Plan offload_dp(int64_t budget, const DpOptions& one) {
    // The class may differ from dp's; the table depends only on the budget, the slots
    // and the recurrence's variant.
    const bool same_table = budget == budget_bytes && one.slots == dp.slots && one.rotor_compat == dp.rotor_compat &&
                            budget > 0 && one.slots > 0;
    std::shared_ptr<const RecomputeTable> start;
    if (!same_table && start_tables && budget > 0 && one.slots > 0) start = start_tables->get(chain, budget, one);
    // Note [An answer known in advance] in offload.h: the class's answer at a smaller
    // budget, as the starts over the budget follow the budget's own solve.
    OffloadAnswer answer;
    for (const Answered& a : answered)
      if (a.shapes == one.offload_shapes && a.rotor_compat == one.rotor_compat &&
          answer_bounds(a.budget_bytes, a.slots, budget, one.slots))
        answer.at_most_units = std::min(answer.at_most_units.value_or(a.units), a.units);
    std::unique_ptr<OffloadDpMemory> memory = dp_memories->take();  // Note [The DPs' memories lent out]
    memory->reserve(chain.length(), most_dp_slots());
    Plan plan = solve_offload(chain, budget, one, memory.get(), same_table ? &table() : start.get(), &answer);
    dp_memories->give_back(std::move(memory));
    if (answer.units) answered.push_back({budget, one.slots, one.offload_shapes, one.rotor_compat, *answer.units});
    if (plan && has_waiting_kept_run(*plan)) dp_waited_after_a_kept_run = true;
    return plan;
  }
  Plan fastest(Plans plans) const { return fastest_fitting(chain, budget_bytes, std::move(plans)); }
  // The most slots any offload DP of this search may have.
  int64_t most_dp_slots() const { return std::max<int64_t>(dp.slots, most_start_slots(chain, dp.slots, options)); }
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
// coarser than the nominal ones (SearchOptions::over_budget_eighths and
// over_budget_slot_factor). Each start costs a DP and a polish, so:
//  - when the best candidate already takes the least time any plan can
//    (sum_fwd_bwd_ms: every op once, no stall), nothing can beat it: no start runs;
//  - a start that cannot be repaired ends the series: the next one is further over;
//  - so does a start whose repaired plan is slower than the best plan of its class so
//    far by more than SearchOptions::over_budget_stop_fraction of that plan's time.
//    Each later start is further over, and its repair must move more bytes over the
//    link to fit: where blocks dominate memory, the repaired plans slow by a third or
//    more from one eighth to the next, and the later starts are the series' dearest
//    DPs (more slots) and polishes (more to repair). Where a later start does win,
//    the repairs before it are within a few percent of the best plan, well inside
//    the fraction: on every committed profile and block-dominated chain that
//    tools/plan_identity.py solves, the stop changes no plan
//    (SolveOptimal.StoppingASeriesOfRepairsChangesNoPlanOnBlockChains). The second
//    class's search runs where a plan of the widest class's DPs ends a kept run
//    waiting (Note [Classes to start from]), and the DPs of the starts a stop skips
//    might have: so where the widest class's series stops before its last start, the
//    second class's search runs as if one had. That costs one more class's search
//    there, and no plan: the second class's search has given the fastest plan at
//    points where only a skipped start's DP plan had made it run.
// A start's budget, `eighths` of the way from the budget to the store-all peak, and
// its DP's options, `dp`'s with that budget's slots; nullopt where it is no larger.
struct StartBudget {
  int64_t budget_bytes;
  DpOptions dp;
};
std::optional<StartBudget> start_over_budget(const Search& s, const DpOptions& dp, int eighths) {
  const int64_t budget_bytes = s.budget_bytes;
  const int64_t larger = budget_bytes + (store_all_peak_bytes(s.chain) - budget_bytes) * eighths / 8;
  if (larger <= budget_bytes) return std::nullopt;
  const auto same_slot_size = static_cast<int64_t>(static_cast<__int128>(dp.slots) * larger / budget_bytes);
  DpOptions wide = dp;
  wide.slots = static_cast<int>(std::min({same_slot_size, most_start_slots(s.chain, dp.slots, s.options), larger}));
  return StartBudget{larger, wide};
}

// `best_ms`: the time of the class's best plan so far (infinity where there is none).
Plans starts_over_budget(Search& s, const DpOptions& dp, double best_ms) {
  Plans repaired;
  const Chain& chain = s.chain;
  const int64_t budget_bytes = s.budget_bytes;
  if (!chain.has_usable_link() || budget_bytes <= 0 || dp.slots <= 0) return repaired;
  std::vector<std::vector<Op>> seen;
  for (const int eighths : s.options.over_budget_eighths) {
    const std::optional<StartBudget> start = start_over_budget(s, dp, eighths);
    if (!start) break;
    Plan plan = s.offload_dp(start->budget_bytes, start->dp);
    if (!plan || std::find(seen.begin(), seen.end(), *plan) != seen.end()) continue;
    seen.push_back(*plan);
    repaired.push_back(s.polish(*plan));
    const SimResult r = simulate_timeline(chain, *repaired.back());
    if (!fits(r, budget_bytes)) break;  // a larger one is further over
    if (r.time_ms > (1 + s.options.over_budget_stop_fraction) * best_ms) {  // and slower yet
      s.stopped_a_series = eighths != s.options.over_budget_eighths.back();
      break;
    }
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
// Each start costs a polish, so only the SearchOptions::kept_stage_starts that gain the most time
// per byte over the budget are tried, and, as for the starts over the budget, none
// when the best plan already takes sum_fwd_bwd_ms.
Plans starts_keeping_a_stage(Search& s, const std::vector<Op>& best) {
  const Chain& chain = s.chain;
  const int64_t budget_bytes = s.budget_bytes;
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
  if (starts.size() > s.options.kept_stage_starts) starts.resize(s.options.kept_stage_starts);
  Plans repaired;
  for (const Start& start : starts) repaired.push_back(s.polish(start.ops));
  return repaired;
}

// Note [Optimal takes the best of everything]
// plan_optimal lists the search's stages in order; docs/solver.md draws them.
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
// they start. Each wider class of the offload DP (OffloadShapes in dp_options.h) finds
// plans at least as fast at every budget, but they keep the link busier, and
// repaired down from a larger budget they may leave the repair less room: every
// widening has made some points of the GPT-2 link reports slower when its class
// replaced the one before it as a start, and others faster (results/HISTORY.md;
// tools/compare_builds.sh compares two builds). So `optimal` runs its whole search
// from the widest class's plans and from those of the three narrowest, and takes the fastest
// (the wider on a tie): never slower than any of them alone. The class between, with
// runs that end waiting but no kept item that moves its input, is not a start of its
// own: on the oracle's small chains the four starts reach its plans' times. The
// second class's search runs only where a plan of the widest class's search ends a
// kept run waiting, or a start it skipped might have (Note [Starts over the
// budget]). Where none does and none moves a kept input either, it would
// return the very same plans (its transitions are the others, in the same order, and
// none of the widest class's chosen ones is missing; `OffloadDp.WithoutTheWidest
// ShapesItsPlanIsTheNarrowerClasssPlan` checks it); where plans move kept inputs, it
// is skipped too, to save a fourth search: running it there changed no result on the
// oracle's small chains (OffloadDpOracle.NeverBeatsTheFastestPlanTheSimulatorAccepts).
// So is every search once
// the plan so far takes sum_fwd_bwd_ms, which nothing can beat. Otherwise `optimal`
// costs four searches, each about one class's DPs and polishes (a plan two classes
// share is polished once).

// Whether `plan` already takes sum_fwd_bwd_ms, every op once with no stall, which no
// plan can beat: then no start need run.
bool unbeatable(const Chain& chain, const std::optional<std::vector<Op>>& plan) {
  return plan && simulate_timeline(chain, *plan).time_ms <= sum_fwd_bwd_ms(chain);
}

// One class's search: the fastest candidate, its DP's plan among them, polished, then
// the starts over the budget and those that keep a stage.
Plan best_of_one_class(Search& s, const DpOptions& one_class, Plans candidates) {
  Plan best = s.fastest(std::move(candidates));
  if (best) best = s.polish(*best);
  if (!unbeatable(s.chain, best)) {
    const double best_ms = best ? simulate_timeline(s.chain, *best).time_ms : std::numeric_limits<double>::infinity();
    Plans finalists = starts_over_budget(s, one_class, best_ms);
    if (best)
      for (auto& start : starts_keeping_a_stage(s, *best)) finalists.push_back(std::move(start));
    finalists.insert(finalists.begin(), std::move(best));  // first: it wins ties
    best = s.fastest(std::move(finalists));
  }
  return best;
}

// Stage 1: the baselines, the recompute DP's plans, offload-all and the pipelined
// family (Note [Optimal takes the best of everything]). Baselines first: on a tie in
// predicted time the simpler plan wins (store-all rather than a DP plan that moves
// data for nothing). Where the offload DP runs (`optimal` over a usable link), an empty
// place at `dp_place` waits for its plan of each class; elsewhere that place holds the
// recompute DP's plan, which is what the offload DP would return there.
// With `pipelined_apart`, the pipelined family's place at `pipelined_place` is left
// empty too, for pipelined_candidate to fill beside the rest (Note [The widest class's
// DP beside the candidates]).
struct Candidates {
  Plans plans;
  size_t dp_place = 0;
  std::optional<size_t> pipelined_place;
};
Plan pipelined_candidate(const Search& s) {
  const bool usable = s.budget_bytes > 0 && s.dp.slots > 0;
  return solve_offload_pipeline(s.chain, s.budget_bytes, s.dp, usable ? &s.table() : nullptr);
}
Candidates candidates_of(const Search& s, bool with_offload, bool pipelined_apart = false) {
  const Chain& chain = s.chain;
  Candidates c;
  for (auto* baseline : {&store_all, &sqrt_segments, &recompute_blocks, &recompute_all, &selective, &pointwise})
    c.plans.push_back((*baseline)(chain, s.budget_bytes, s.dp));
  c.dp_place = c.plans.size();
  // The offload DP counts carried bytes twice (Note [Carried bytes] in chain.h): its
  // plans fit but may be slower than the recompute DP's, which counts them exactly.
  const bool offload_dp_runs = with_offload && chain.has_usable_link();
  const bool usable = s.budget_bytes > 0 && s.dp.slots > 0;
  RecomputePlans recompute =
      usable ? recompute_plans(chain, s.budget_bytes, s.dp, s.options, s.table(), !offload_dp_runs || chain.carries())
             : RecomputePlans{};
  if (offload_dp_runs) c.plans.push_back(std::nullopt);
  c.plans.push_back(std::move(recompute.at_budget));
  c.plans.push_back(std::move(recompute.with_slack));
  if (with_offload && chain.link) {
    c.plans.push_back(offload_all(chain, s.budget_bytes, s.dp));
    if (pipelined_apart) c.pipelined_place = c.plans.size();
    c.plans.push_back(pipelined_apart ? std::nullopt : pipelined_candidate(s));
  }
  return c;
}

constexpr OffloadShapes kWidest = OffloadShapes::MovingKeptInputs;

// One class's whole search, on a search of its own.
struct ClassSearch {
  Plan best;
  // A plan of its offload DP ended a kept run waiting, or a DP skipped might have
  // (Note [Starts over the budget]).
  bool may_wait_after_a_kept_run = false;
};
DpOptions class_options(const DpOptions& dp, OffloadShapes shapes) {
  DpOptions one_class = dp;
  one_class.offload_shapes = shapes;
  return one_class;
}
// `dp_plan`: the class's offload DP plan at the budget, where it has been made already.
ClassSearch search_one_class(Search& s, OffloadShapes shapes, const Candidates& candidates,
                             std::optional<Plan> dp_plan = std::nullopt) {
  const DpOptions one_class = class_options(s.dp, shapes);
  Plans with_dp = candidates.plans;
  with_dp[candidates.dp_place] = dp_plan ? std::move(*dp_plan) : s.offload_dp(s.budget_bytes, one_class);
  ClassSearch out;
  out.best = best_of_one_class(s, one_class, std::move(with_dp));
  out.may_wait_after_a_kept_run = s.dp_waited_after_a_kept_run || s.stopped_a_series;
  return out;
}

// Stages 2 and 3: each class's search (Note [Classes to start from]), widest first,
// taken in that order: where the widest's plan takes the least time any plan can, no
// other counts, and only its plans tell whether the second class runs (where one of
// them ends a kept run waiting). The narrower classes, widest first: the first of them
// is the second class.
const std::vector<OffloadShapes>& narrower_classes() {
  static const std::vector<OffloadShapes> rest = {OffloadShapes::ThroughKeptRuns, OffloadShapes::ThroughRecomputation,
                                                  OffloadShapes::Windowed};
  return rest;
}
// The fastest of the classes' plans, in the sequential order.
Plan fastest_of_the_classes(Search& s, ClassSearch& widest, std::vector<std::optional<ClassSearch>>& searched) {
  Plan best = s.fastest({std::nullopt, widest.best});
  for (std::optional<ClassSearch>& one : searched) {
    if (unbeatable(s.chain, best)) break;
    if (one) best = s.fastest({std::move(best), std::move(one->best)});
  }
  return best;
}
// Note [The widest class beside the others]
// On one thread the widest class's search runs first and alone, and the others only
// where it is beatable (best_over_each_class). With more threads the others' searches
// do not wait for it: the two narrowest classes' searches start beside it, and the
// second class's search is the last piece, which waits for the widest's plans to tell
// whether it runs (Note [Stages 1 to 3 in one queue]). Each search is a pure function
// of its class and the problem (Note [Searches side by side] in side_by_side.h), and
// the results are taken in the sequential order, so the plan is the same; where the
// widest's plan turns out unbeatable, the others' work is dropped.
Plan best_over_each_class(Search& s, const Candidates& candidates, std::optional<Plan> widest_dp) {
  const std::vector<OffloadShapes>& rest = narrower_classes();
  std::vector<std::optional<ClassSearch>> searched(rest.size());
  ClassSearch widest = search_one_class(s, kWidest, candidates, std::move(widest_dp));
  if (!unbeatable(s.chain, widest.best)) {
    for (size_t i = 0; i < rest.size(); ++i) {
      if (i == 0 && !widest.may_wait_after_a_kept_run) continue;
      Search own(s, 1);
      searched[i] = search_one_class(own, rest[i], candidates);
    }
  }
  return fastest_of_the_classes(s, widest, searched);
}

// Note [The widest class's DP beside the candidates]
// Stage 2 starts with the widest class's offload DP at the budget, which reads none
// of the candidates; the two share only the recompute table at the budget, filled
// first and then only read, and the DP alone writes its search's DP memory. So
// where the DP surely runs (a usable link, and no probe, which may stop after the
// candidates: Note [A probe asks only whether a plan fits]), the two run side by
// side, and the DP's plan is the one it would have made after them. The pipelined
// family (offload_pipeline.h), on long chains the dearest candidate and longer than
// the DP, is a third piece, started first: it too only reads the table and
// simulates, and its plan takes its own place among the candidates.
//
// Note [Stages 1 to 3 in one queue]
// On more than one core, stage 1's pieces and the classes' searches run from one
// queue of pieces, taken in order by the threads as each ends its last (Note
// [Searches side by side] in side_by_side.h):
//  1. the pipelined family, the dearest candidate on long chains; the widest class's
//     offload DP at the budget (Note [The widest class's DP beside the candidates]),
//     then, on the same thread, the recompute table of the first start over the
//     budget (Note [The first start's table in the queue]); the other candidates;
//  2. the offload DPs at the budget of the two narrowest classes, the narrowest first:
//     they read nothing but the recompute table at the budget, so they fill the core
//     that the pipelined family leaves idle once the pieces beside it end; then the
//     plans of the blocks (Note [The blocks' plans in the queue]);
//  3. the rest of the widest class's search, and of the two narrowest classes'
//     searches, each from its DP's plan; each waits for the candidates, and for its
//     DP where that still runs;
//  4. the second class's search, which waits for the widest's plans to tell whether
//     it runs (Note [The widest class beside the others]).
// Every piece waits only for pieces before it in the queue, which a thread has taken
// already, so the queue never stalls with every thread waiting. Each class's search
// runs on a search object of its own, its DP at the budget included, so it is the
// search the sequential order makes; the results are taken in that order, so the plan
// is the same op for op, and where the widest's plan turns out unbeatable the others'
// work is dropped.
//
// Note [The blocks' plans in the queue]
// Stage 5's plans of the blocks (Note [Known plans from the blocks]) read nothing of
// the search: they solve the chain of the blocks, which shares only the polished
// plans' cache with it. In the sequential order they come after the kick of the best
// plan, and their own kicks after that, so on two cores the kick of the best ran beside
// the blocks' solve, the longer of the two, and the kicks of their plans then ran with
// a core idle. So on more than one core the blocks' plans are a piece of the queue of
// stages 1 to 3, taken once the classes' DPs at the budget are, before the classes'
// searches; and stage 4's kick of the best then runs beside the kicks of the blocks'
// plans (kicked_beside_the_blocks). Each kick is a pure function of its plan, so the
// plans are the sequential order's. The sequential order makes no plans of the blocks
// where the best plan takes the least time any plan can (unbeatable), and on short
// chains over a fast link solving the blocks then cost more than the whole search. The
// piece cannot know the best plan yet, but where the widest class's DP plan at the
// budget is unbeatable, so is the best: the piece waits for that DP (placed after the
// classes' DPs, it is seldom taken before that one has ended) and makes nothing there.
// Elsewhere, where the best plan still turns out unbeatable, the blocks' plans are
// dropped.
//
// Note [The first start's table in the queue]
// Every class's search that gets past its polished plan at the budget begins its
// starts over the budget (Note [Starts over the budget]) with the DP at the first
// start's budget, and that DP prices subchains with the recompute table of that budget
// and its slots (Note [The starts' tables shared by the classes]), the same for every
// class. The first search to reach it filled it, on its own thread, while the others
// waited for it; and every search waits for the pipelined family, the dearest
// candidate at operator granularity, before it starts. So at operator granularity one
// core ran the pipelined family, the other ran out of pieces and idled, and then one
// core filled the start's table while the other idled again. The table reads nothing
// of the search, so it is filled in the queue, by the thread that ran the widest
// class's DP at the budget, right after that DP: it fills the core the pipelined
// family leaves idle, while the other core runs the narrower classes' DPs and the
// plans of the blocks, and the searches read it from the shelf. Placed as a piece of
// its own after the pipelined family, it made that core wait for the widest class's
// DP (below) on chains where the pipelined family ends first; placed after the
// narrower classes' DPs, it began only once they had ended, and the searches waited.
// As for the blocks, nothing is filled where the widest class's DP plan at the budget
// is unbeatable, as no start then runs. A table is a pure
// function of its budget, slots and variant, whoever fills it, so the plans are the
// same; where every class's plan turns out unbeatable it is filled for nothing.
Plans plans_of_the_blocks(Search& s);
// Fills the first start's table on `s`'s shelf of start tables (Note [The first
// start's table in the queue]), with `s`'s threads.
void fill_first_start_table(const Search& s) {
  if (!s.start_tables || s.options.over_budget_eighths.empty()) return;
  const std::optional<StartBudget> start = start_over_budget(s, s.dp, s.options.over_budget_eighths.front());
  if (start && start->dp.slots > 0) s.start_tables->get(s.chain, start->budget_bytes, start->dp);
}
Plan candidates_and_classes_side_by_side(Search& s, Plans& block_plans) {
  const std::vector<OffloadShapes>& rest = narrower_classes();
  const int threads = s.dp.num_threads;
  // Made here, before any thread starts, so that only this thread ever fills the table.
  const Search beside(s, threads_per_piece(threads, 2));
  const int inner_threads = threads_per_piece(threads, static_cast<int>(rest.size()) + 1);
  std::vector<std::unique_ptr<Search>> own;
  for (size_t i = 0; i < rest.size(); ++i) own.push_back(std::make_unique<Search>(s, inner_threads));
  Search blocks(s, inner_threads);  // Note [The blocks' plans in the queue]
  const Search first_start(s, inner_threads);  // Note [The first start's table in the queue]

  // Each piece that others wait for sets its promise, with its error where it threw.
  struct Done {
    std::promise<void> promise;
    std::shared_future<void> future = promise.get_future().share();
    void run(const std::function<void()>& work) {
      try {
        work();
        promise.set_value();
      } catch (...) {
        promise.set_exception(std::current_exception());
        throw;
      }
    }
  };
  Done pipelined_done, widest_dp_done, candidates_done;
  std::vector<Done> dp_done(rest.size());
  Plan pipelined, widest_dp;
  bool widest_dp_unbeatable = false;
  Candidates candidates;
  std::vector<Plan> dp_plans(rest.size());
  ClassSearch widest;
  std::vector<std::optional<ClassSearch>> searched(rest.size());
  std::promise<bool> second_runs;  // set once the widest's search has ended
  std::shared_future<bool> runs = second_runs.get_future().share();
  // The candidates with the pipelined family's plan in its place, once both are made.
  const auto every_candidate = [&] {
    pipelined_done.future.get();
    candidates_done.future.get();
    Candidates all = candidates;
    if (all.pipelined_place) all.plans[*all.pipelined_place] = pipelined;
    return all;
  };
  // Every narrower class but the second, whose search may not run: the narrowest first.
  std::vector<size_t> narrowest_first;
  for (size_t i = rest.size(); i-- > 1;) narrowest_first.push_back(i);
  std::vector<std::function<void()>> pieces;
  pieces.push_back([&] { pipelined_done.run([&] { pipelined = pipelined_candidate(beside); }); });  // 1
  pieces.push_back([&] {
    widest_dp_done.run([&] {
      widest_dp = s.offload_dp(s.budget_bytes, class_options(s.dp, kWidest));
      widest_dp_unbeatable = unbeatable(s.chain, widest_dp);
    });
    if (!widest_dp_unbeatable) fill_first_start_table(first_start);  // Note [The first start's table in the queue]
  });
  pieces.push_back([&] {
    candidates_done.run([&] { candidates = candidates_of(beside, /*with_offload=*/true, /*pipelined_apart=*/true); });
  });
  for (const size_t i : narrowest_first)  // 2
    pieces.push_back([&, i] {
      dp_done[i].run([&] { dp_plans[i] = own[i]->offload_dp(s.budget_bytes, class_options(s.dp, rest[i])); });
    });
  pieces.push_back([&] {  // Note [The blocks' plans in the queue]
    widest_dp_done.future.get();
    if (!widest_dp_unbeatable) block_plans = plans_of_the_blocks(blocks);
  });
  pieces.push_back([&] {  // 3
    try {
      const Candidates all = every_candidate();
      widest_dp_done.future.get();
      widest = search_one_class(s, kWidest, all, std::move(widest_dp));
      second_runs.set_value(widest.may_wait_after_a_kept_run && !unbeatable(s.chain, widest.best));
    } catch (...) {
      second_runs.set_value(false);
      throw;
    }
  });
  for (const size_t i : narrowest_first)
    pieces.push_back([&, i] {
      const Candidates all = every_candidate();
      dp_done[i].future.get();
      searched[i] = search_one_class(*own[i], rest[i], all, std::move(dp_plans[i]));
    });
  pieces.push_back([&] {  // 4
    if (runs.get()) searched[0] = search_one_class(*own[0], rest[0], every_candidate());
  });
  run_side_by_side(pieces, threads);
  return fastest_of_the_classes(s, widest, searched);
}

// `search`'s result, the classes' searches in it sharing the starts' tables (Note [The
// starts' tables shared by the classes]), which go once it has ended.
template <typename ClassSearches>
Plan with_start_tables(Search& s, ClassSearches search) {
  s.start_tables = std::make_shared<RecomputeTableShelf>();
  Plan best = search();
  s.start_tables.reset();  // the searches beside this one have ended: the tables go
  return best;
}

// Note [Known plans from the blocks]
// Where the stages group into blocks (Note [Block boundaries] in coarsen.h), `optimal`
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
// can hold more than the block plan did. So when it is over the budget by E bytes, the
// blocks are solved again at their plan's peak less E, up to
// SearchOptions::block_budgets times, until a written-out plan fits. The first plan and the
// last are polished (the polish repairs the first, and at times it then beats the
// one that fits) and both are candidates. They come after the kicks (kicks.h), so
// that `optimal` on named stages is never slower than on the same stages unnamed, and
// each that fits is kicked in turn: a kicked, repaired first plan can beat the
// blocks' own plan.
//
// The first block plan is also written out without its ending-carry moves, polished
// and kicked as one more candidate. Moving a carry frees memory for link time, and
// where the link is the bottleneck the searches can find a faster plan from the one
// that leaves the carries in place (the op-granularity link reports,
// tools/make_op_granularity_report.sh, hold such points).
Plan optimal(const Chain& chain, int64_t budget_bytes, const DpOptions& dp, const SearchOptions& options,
             const std::vector<std::vector<Op>>& known_plans, RecomputeTableShelf* tables,
             std::shared_ptr<DpMemories> memories);
Plans plans_of_the_blocks(Search& s) {
  const Chain& chain = s.chain;
  const int64_t budget_bytes = s.budget_bytes;
  Plans polished;
  size_t firsts = 0;
  const std::optional<Coarsening> blocks = coarsen_to_blocks(chain);
  if (!blocks) return polished;
  int64_t blocks_budget = budget_bytes;
  for (int attempt = 0; attempt < s.options.block_budgets && blocks_budget > 0; ++attempt) {
    const Plan plan = optimal(blocks->chain, blocks_budget, s.dp, s.options, {}, nullptr, s.dp_memories);
    if (!plan) break;
    std::vector<Op> ops = write_out(chain, *blocks, *plan);
    const SimResult r = simulate_timeline(chain, ops);
    if (!r.valid) break;
    if (attempt == 0) {
      std::vector<Op> carries_stay;
      std::copy_if(ops.begin(), ops.end(), std::back_inserter(carries_stay), [](const Op& op) {
        return op.kind != OpKind::OffloadCarried && op.kind != OpKind::PrefetchCarried;
      });
      if (carries_stay.size() != ops.size()) polished.push_back(s.polish(carries_stay));
    }
    polished.push_back(s.polish(ops));
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

// Stage 5's kicks, side by side (Note [Searches side by side] in side_by_side.h): of
// each plan of the blocks that fits and can still be beaten, after `first` where given
// (the kick of the best plan, where it has not run yet). Then, unless the kicked best
// takes the least time any plan can, the fastest of the best and the finalists.
Plan kicked_finalists(Search& s, Plan& best, Plans finalists, const std::function<void()>& first = {}) {
  std::vector<std::function<void()>> kicks;
  if (first) kicks.push_back(first);
  for (auto& plan : finalists)
    if (plan && fits(simulate_timeline(s.chain, *plan), s.budget_bytes) && !unbeatable(s.chain, plan))
      kicks.push_back([&s, &plan] { plan = kick_search(s.chain, s.budget_bytes, *plan, s.options.kicks); });
  run_side_by_side(kicks, s.dp.num_threads);
  if (unbeatable(s.chain, best)) return best;
  finalists.insert(finalists.begin(), std::move(best));  // first: it wins ties
  return s.fastest(std::move(finalists));
}

// Stage 4, the kicks of the best plan (Note [Kicks out of a local optimum] in kicks.h),
// and stage 5, the plans of the blocks, each that fits kicked, against the kicked best.
// The blocks' plans are made beside the first kicks; where the kicked best takes the
// least time any plan can, they are dropped, as the sequential search never made them.
Plan kicked_then_the_blocks(Search& s, Plan best) {
  if (unbeatable(s.chain, best)) return best;
  Plans finalists;
  Search own(s, threads_per_piece(s.dp.num_threads, 2));  // before the threads start, as above
  run_side_by_side({[&] {
                      if (best) best = kick_search(s.chain, s.budget_bytes, *best, s.options.kicks);
                    },
                    [&] { finalists = plans_of_the_blocks(own); }},
                   s.dp.num_threads);
  if (unbeatable(s.chain, best)) return best;
  return kicked_finalists(s, best, std::move(finalists));
}

// The same where the blocks' plans were made in the queue (Note [The blocks' plans in
// the queue]): the best plan's kick runs beside theirs.
Plan kicked_beside_the_blocks(Search& s, Plan best, Plans block_plans) {
  if (unbeatable(s.chain, best)) return best;
  return kicked_finalists(s, best, std::move(block_plans), [&] {
    if (best) best = kick_search(s.chain, s.budget_bytes, *best, s.options.kicks);
  });
}

// Stage 6: Note [Known plans]; a known plan that wins is polished.
Plan with_known_plans(Search& s, Plan best, const std::vector<std::vector<Op>>& known) {
  if (known.empty()) return best;
  Plans against{best};
  against.insert(against.end(), known.begin(), known.end());
  Plan winner = s.fastest(std::move(against));
  if (!winner || winner == best) return winner;
  return s.polish(*winner);
}

}  // namespace

int64_t max_optimal_slots(const Chain& chain) {
  int64_t most = max_recompute_table_slots(chain);
  if (chain.has_usable_link()) most = std::min(most, max_offload_dp_slots(chain));
  return most;
}

namespace {
Plan optimal(const Chain& chain, int64_t budget_bytes, const DpOptions& dp, const SearchOptions& options,
             const std::vector<std::vector<Op>>& known_plans, RecomputeTableShelf* tables,
             std::shared_ptr<DpMemories> memories) {
  Search s(chain, budget_bytes, dp, options, tables, std::move(memories));
  const bool offload_dp_runs = chain.has_usable_link() && !options.any_fitting_plan && budget_bytes > 0 && dp.slots > 0;
  Plan best;
  if (offload_dp_runs && threads_per_piece(dp.num_threads, 1) > 1) {
    Plans block_plans;  // 5, made in the queue of 1 to 3
    best = with_start_tables(s, [&] { return candidates_and_classes_side_by_side(s, block_plans); });  // 1, 2, 3
    best = kicked_beside_the_blocks(s, std::move(best), std::move(block_plans));  // 4, 5
    return with_known_plans(s, std::move(best), known_plans);  // 6
  }
  std::optional<Plan> widest_dp;
  if (offload_dp_runs) widest_dp.emplace(s.offload_dp(budget_bytes, class_options(s.dp, kWidest)));
  const Candidates candidates = candidates_of(s, /*with_offload=*/true);  // 1
  // Note [A probe asks only whether a plan fits]
  // The search for the smallest budget that works (min_feasible_budget in solve.cpp)
  // asks each budget only whether `optimal` has a plan there. Every later step takes
  // the fastest of the plans so far and its own, so once one plan fits, `optimal` has
  // one: a probe stops there, after the candidates or after the classes' searches.
  // Only a budget where nothing fits yet runs every step, which may still repair a plan.
  if (options.any_fitting_plan)
    if (Plan any = s.fastest(candidates.plans)) return any;
  if (chain.has_usable_link()) {
    best = with_start_tables(s, [&] { return best_over_each_class(s, candidates, std::move(widest_dp)); });  // 2, 3
    if (options.any_fitting_plan && best) return best;
    best = kicked_then_the_blocks(s, std::move(best));  // 4, 5
  } else {
    best = best_of_one_class(s, dp, candidates.plans);  // the recompute DP's, polished
  }
  return with_known_plans(s, std::move(best), known_plans);  // 6
}
}  // namespace

std::optional<std::vector<Op>> plan_optimal(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                            const SearchOptions& options,
                                            const std::vector<std::vector<Op>>& known_plans,
                                            RecomputeTableShelf* tables) {
  return optimal(chain, budget_bytes, dp, options, known_plans, tables, nullptr);
}

std::optional<std::vector<Op>> plan_recompute_only(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                                   const SearchOptions& options, RecomputeTableShelf* tables) {
  const Search s(chain, budget_bytes, dp, options, tables);
  return s.fastest(candidates_of(s, /*with_offload=*/false).plans);
}

}  // namespace memopt::solver

// offload_bruteforce_test.cpp: the offload DP (solver/dp/offload.h) against an
// exhaustive search over its schedule class (offload_brute_force.h), against the
// search over every plan the timeline simulator accepts (exhaustive_oracle.h), and
// the closed-form oracles of unlimited and hidden bandwidth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <set>

#include "solver/dp/baselines.h"
#include "solver/dp/offload.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "tests/solver/exhaustive_oracle.h"
#include "tests/solver/offload_brute_force.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

using testing::OffloadCandidate;

using testing::small_chain;

// A budget `percent` of the way from the largest backward working set (the least
// any plan needs, up to the transients' order) to the store-all peak; below it for a
// negative percent.
int64_t budget_between_floor_and_store_all(const Chain& chain, int percent) {
  int64_t floor_bytes = 0;
  for (int i = 0; i < chain.length(); ++i)
    floor_bytes = std::max(floor_bytes, chain.x(i + 1) + chain.xbar(i + 1) + 2 * chain.x(i) + chain.btmp(i));
  const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
  return std::max<int64_t>(1, floor_bytes + (store_all - floor_bytes) * percent / 100);
}

// A prefetch followed at once by two or more bwd ops that do not wait for it (a KR
// run; one item ahead leaves room for one).
bool prefetches_across_a_run(const Chain& chain, const std::vector<Op>& ops) {
  for (size_t p = 0; p < ops.size(); ++p) {
    if (ops[p].kind != OpKind::Prefetch && ops[p].kind != OpKind::PrefetchSaved) continue;
    int num_bwd = 0;
    for (size_t q = p + 1; q < ops.size() && ops[q].kind == OpKind::Bwd; ++q) {
      const bool waits = ops[p].kind == OpKind::Prefetch ? compute_reads(chain, ops[q]) == ops[p].index
                                                         : ops[q].index + 1 == ops[p].index;
      if (waits) break;
      ++num_bwd;
    }
    if (num_bwd >= 2) return true;
  }
  return false;
}

// A prefetch issued after the loss between a fwd_keep and a bwd: the previous
// item's data coming back inside a recomputed run (a CR item).
bool prefetches_inside_a_recomputed_run(const std::vector<Op>& ops) {
  const auto loss = std::find(ops.begin(), ops.end(), Op{OpKind::Loss, -1});
  for (auto p = loss; p != ops.end() && p + 1 != ops.end(); ++p)
    if ((p->kind == OpKind::Prefetch || p->kind == OpKind::PrefetchSaved) && (p - 1)->kind == OpKind::FwdKeep &&
        (p + 1)->kind == OpKind::Bwd)
      return true;
  return false;
}

// An offload whose copy is still running when the second of the fwd_keep ops right
// after it starts: a copy through a kept run (Note [A copy through a kept run]).
bool copies_through_a_kept_run(const Chain& chain, const std::vector<Op>& ops) {
  const SimResult r = simulate_timeline(chain, ops);
  for (size_t p = 0; p + 2 < ops.size(); ++p) {
    if (ops[p].kind != OpKind::Offload && ops[p].kind != OpKind::OffloadSaved) continue;
    if (ops[p + 1].kind != OpKind::FwdKeep || ops[p + 2].kind != OpKind::FwdKeep) continue;
    const int done_before = r.offload_done_before[p];
    if (done_before < 0 || done_before > static_cast<int>(p) + 2) return true;
  }
  return false;
}

TEST(OffloadDpBruteForce, EqualsTheExhaustiveSearchOverItsClass) {
  std::mt19937_64 rng(21);
  int num_compared = 0, num_offloading = 0, num_beating_recompute = 0, num_prefetching_across_a_run = 0;
  int num_waiting = 0, num_prefetching_inside_a_run = 0, num_through_a_kept_run = 0, num_waiting_after_a_run = 0;
  int num_moving_inputs = 0, num_moving_both = 0;
  int num_slower[4] = {0, 0, 0, 0};  // the four narrower classes, slower than the widest
  for (int trial = 0; trial < 160; ++trial) {
    const int L = 1 + trial % 4;
    // One chain in three with backwards that peak below their gradient (Note [A
    // backward may peak below its gradient] in solver/chain/chain.h).
    Chain chain = small_chain(rng, L, trial % 3 == 2 ? 0.5 : 0.0);
    // One chain in four with back-to-back times (Note [A stage run back to back] in
    // solver/chain/chain.h), drawn from a generator of its own so that the other chains
    // stay as they were.
    std::mt19937_64 price_rng(static_cast<uint64_t>(trial));
    if (trial % 4 == 3) testing::give_pair_times(chain, price_rng, 0.8, true);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::vector<OffloadCandidate> all = testing::all_offload_class_schedules(chain);
    // Every distinct peak is a budget at which the optimum may change.
    std::set<int64_t> peaks;
    for (const auto& c : all) peaks.insert(c.peak_bytes);
    std::vector<int64_t> budgets(peaks.begin(), peaks.end());
    if (budgets.size() > 10) {
      std::vector<int64_t> sample;
      for (size_t i = 0; i < 10; ++i) sample.push_back(budgets[i * budgets.size() / 10]);
      sample.push_back(budgets.back());
      budgets = sample;
    }
    budgets.push_back(budgets.front() - 1);  // below every schedule: both must refuse
    for (const int64_t budget : budgets) {
      if (budget <= 0) continue;
      SCOPED_TRACE("budget " + std::to_string(budget));
      const auto bf = testing::fastest_offload_fitting(all, budget);
      // One slot per byte: the DP's rounding is exact.
      const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
      ASSERT_EQ(dp.has_value(), bf.has_value());
      if (!dp) continue;
      const SimResult r = simulate_timeline(chain, *dp);
      ASSERT_TRUE(r.valid) << r.error;
      EXPECT_LE(r.peak_bytes, budget);
      EXPECT_EQ(r.time_ms, bf->time_ms);
      ++num_compared;
      bool offloads = false;
      for (const Op& op : *dp) offloads |= is_copy(op.kind);
      num_offloading += offloads;
      num_prefetching_across_a_run += prefetches_across_a_run(chain, *dp);
      num_prefetching_inside_a_run += prefetches_inside_a_recomputed_run(*dp);
      num_through_a_kept_run += copies_through_a_kept_run(chain, *dp);
      num_waiting_after_a_run += has_waiting_kept_run(*dp);
      // A kept item that moves its input, and one that moves its saved state too (its
      // two copies back to back: Note [A kept item that moves its input] in offload.h).
      for (size_t p = 0; p < dp->size(); ++p) {
        if ((*dp)[p].kind != OpKind::OffloadInput) continue;
        ++num_moving_inputs;
        num_moving_both += p + 1 < dp->size() && (*dp)[p + 1].kind == OpKind::OffloadSaved;
        break;
      }
      num_waiting += std::find(dp->begin(), dp->end(), Op{OpKind::WaitOffloads, -1}) != dp->end();
      const auto rec = solve_recompute(chain, budget, {static_cast<int>(budget), false, 1});
      num_beating_recompute += !rec || simulate_sequential(chain, *rec).time_ms > r.time_ms;
      // Each narrower class is a subset of the one after it: never faster, and
      // without the shapes it leaves out.
      double wider_ms = r.time_ms;
      int level = 0;
      for (const OffloadShapes shapes :
           {OffloadShapes::WaitingKeptRuns, OffloadShapes::ThroughKeptRuns, OffloadShapes::ThroughRecomputation,
            OffloadShapes::Windowed}) {
        const auto narrow = solve_offload(chain, budget, {static_cast<int>(budget), false, 1, shapes});
        if (!narrow) break;
        const SimResult n = simulate_timeline(chain, *narrow);
        ASSERT_TRUE(n.valid) << n.error;
        EXPECT_LE(n.peak_bytes, budget);
        EXPECT_GE(n.time_ms, wider_ms);
        EXPECT_FALSE(has_kept_input_move(*narrow));
        if (shapes != OffloadShapes::WaitingKeptRuns) {
          EXPECT_FALSE(has_waiting_kept_run(*narrow));
        }
        if (shapes != OffloadShapes::WaitingKeptRuns && shapes != OffloadShapes::ThroughKeptRuns) {
          EXPECT_FALSE(copies_through_a_kept_run(chain, *narrow));
        }
        if (shapes == OffloadShapes::Windowed) {
          EXPECT_FALSE(prefetches_inside_a_recomputed_run(*narrow));
        }
        num_slower[level++] += n.time_ms > r.time_ms;
        wider_ms = n.time_ms;
      }
    }
  }
  // Not vacuous: many comparisons, and offloading matters in a good share of them.
  EXPECT_GT(num_compared, 400);
  EXPECT_GT(num_offloading, 60);
  EXPECT_GT(num_beating_recompute, 30);
  EXPECT_GT(num_prefetching_across_a_run, 0);  // the KR items are reached
  EXPECT_GT(num_waiting, 0);  // and the waits
  EXPECT_GT(num_prefetching_inside_a_run, 0);  // and the CR items
  EXPECT_GT(num_through_a_kept_run, 0);  // and the copies through a KR run
  EXPECT_GT(num_waiting_after_a_run, 0);  // and the waits after one
  EXPECT_GT(num_moving_inputs, 30);  // and the kept items that move their input
  EXPECT_GT(num_moving_both, 0);  // with their saved state
  EXPECT_GT(num_slower[0], 0);  // the narrower classes are reached too, and they are narrower
  EXPECT_GT(num_slower[1], num_slower[0]);
  EXPECT_GT(num_slower[2], num_slower[1]);
  EXPECT_GT(num_slower[3], num_slower[2]);
  std::printf("offload class: %d budgets, %d plans offload, %d prefetch across a run, %d inside a recomputed run, "
              "%d wait for an offload, %d copy through a kept run, %d wait after one, %d move a kept input (%d with "
              "the saved state after it); without the kept input moves, slower at %d, without the waits after a "
              "kept run too, at %d, without the copies through one too, at %d, without the recomputed runs and "
              "the copies through them too, at %d\n",
              num_compared, num_offloading, num_prefetching_across_a_run, num_prefetching_inside_a_run, num_waiting,
              num_through_a_kept_run, num_waiting_after_a_run, num_moving_inputs, num_moving_both, num_slower[0],
              num_slower[1], num_slower[2], num_slower[3]);
}

// The oracle's two exact cuts (Notes [Equal futures] and [Copies issued too early])
// against the same search without them, on chains small enough for the latter, with
// integer and real times: the same fastest time at every budget, or none for both.
TEST(ExhaustiveOracle, ItsCutsLoseNoPlan) {
  std::mt19937_64 rng(31);
  int64_t nodes_with = 0, nodes_without = 0;
  int num_compared = 0, num_with_copies = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int L = trial < 30 ? 1 + trial % 2 : 3;
    Chain chain = small_chain(rng, L);
    if (trial % 2) {  // real times: ties between copy ends and op starts become rare
      std::uniform_real_distribution<double> ms(0.05, 6.0);
      for (Stage& st : chain.stages) { st.fwd_ms = ms(rng); st.bwd_ms = ms(rng); st.fwd_nograd_ms.reset(); }
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    for (const int percent : {-10, 0, 25, 50, 75}) {
      const int64_t budget = budget_between_floor_and_store_all(chain, percent);
      SCOPED_TRACE("budget " + std::to_string(budget));
      const testing::OracleResult cut = testing::fastest_valid_plan(chain, budget);
      const testing::OracleResult full = testing::fastest_valid_plan_without_cuts(chain, budget);
      nodes_with += cut.num_nodes;
      nodes_without += full.num_nodes;
      ASSERT_EQ(cut.ops.has_value(), full.ops.has_value());
      if (!cut.ops) continue;
      EXPECT_EQ(cut.time_ms, full.time_ms);
      const SimResult r = simulate_timeline(chain, *cut.ops);
      ASSERT_TRUE(r.valid) << r.error;
      EXPECT_LE(r.peak_bytes, budget);
      EXPECT_EQ(r.time_ms, cut.time_ms);
      ++num_compared;
      num_with_copies += std::any_of(cut.ops->begin(), cut.ops->end(), [](const Op& op) { return is_copy(op.kind); });
    }
  }
  std::printf("oracle cuts: %d budgets, %lld prefixes with the cuts, %lld without\n", num_compared,
              static_cast<long long>(nodes_with), static_cast<long long>(nodes_without));
  EXPECT_GT(num_compared, 80);
  EXPECT_GT(num_with_copies, 20);   // not vacuous: the fastest plans move data
  EXPECT_LT(nodes_with, nodes_without);
}

// Offload and prefetch of the same activation in one gap are a plan's way to make
// the next op wait until an earlier copy has freed its bytes: a single stage whose
// loss needs room that only the end of a_0's offload gives; the same plan without
// the round trip does not fit (a case the search found, kept fixed).
TEST(ExhaustiveOracle, FindsPlansThatWaitForACopyThroughARoundTrip) {
  Chain chain;
  chain.input_bytes = 6;
  Stage s;
  s.name = "s0";
  s.fwd_ms = 0;
  s.bwd_ms = 1;
  s.out_bytes = 0;
  s.saved_bytes = 5;
  s.fwd_tmp_bytes = 1;
  s.bwd_tmp_bytes = 1;
  chain.stages.push_back(s);
  chain.loss.bwd_ms = 0;
  chain.loss.bwd_tmp_bytes = 17;
  chain.link = Link{3000, 2000};
  const std::vector<Op> round_trip = {{OpKind::FwdCkpt, 0}, {OpKind::Offload, 0}, {OpKind::Offload, 1},
                                      {OpKind::Prefetch, 1}, {OpKind::Loss, -1}, {OpKind::Prefetch, 0},
                                      {OpKind::FwdKeep, 0}, {OpKind::Bwd, 0}};
  const SimResult r = simulate_timeline(chain, round_trip);
  ASSERT_TRUE(r.valid) << r.error;
  const int64_t budget = r.peak_bytes;
  std::vector<Op> without = round_trip;
  without.erase(without.begin() + 2, without.begin() + 4);
  EXPECT_GT(simulate_timeline(chain, without).peak_bytes, budget);
  const testing::OracleResult best = testing::fastest_valid_plan(chain, budget);
  ASSERT_TRUE(best.ops.has_value());
  EXPECT_LE(best.time_ms, r.time_ms);
  EXPECT_EQ(best.time_ms, testing::fastest_valid_plan_without_cuts(chain, budget).time_ms);
  // wait_offloads says the same directly, and the DP finds it (Note [Waiting for
  // the previous offload] in offload.h): as fast as the oracle's plan.
  const std::vector<Op> waiting = {{OpKind::FwdCkpt, 0}, {OpKind::Offload, 0}, {OpKind::WaitOffloads, -1},
                                   {OpKind::Loss, -1},   {OpKind::Prefetch, 0}, {OpKind::FwdKeep, 0},
                                   {OpKind::Bwd, 0}};
  EXPECT_TRUE(fits(simulate_timeline(chain, waiting), budget));
  const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
  ASSERT_TRUE(dp.has_value());
  EXPECT_NE(std::find(dp->begin(), dp->end(), Op{OpKind::WaitOffloads, -1}), dp->end());
  EXPECT_EQ(simulate_timeline(chain, *dp).time_ms, best.time_ms);
}

// The DP against the fastest plan of the oracle's vocabulary (Note [What the oracle
// enumerates]; or `optimal`'s, where a kept-input move makes it faster) at budgets spread from the
// least any plan could need to the
// store-all peak, with one slot per byte so that the DP loses nothing to rounding,
// on chains of up to 4 stages. `optimal`'s plan, or the oracle's at the budget below
// when faster, seeds the oracle's time bound; the oracle still searches every faster
// plan. The oracle is a lower bound on every valid plan, so neither the DP's plan
// nor `optimal`'s can be faster; where they are slower, they miss the oracle's plan.
// How often is recorded. Asserted: `optimal` never misses, while the DP alone does
// (Note [The offload schedule class] lists what its class lacks).
TEST(OffloadDpOracle, NeverBeatsTheFastestPlanTheSimulatorAccepts) {
  std::mt19937_64 rng(23);
  int64_t num_nodes = 0, num_plans = 0;
  int num_chains = 0, num_compared = 0, num_equal = 0, num_slower = 0, num_optimal_slower = 0;
  int num_optimal_none = 0, num_oracle_budgets = 0, num_optimal_slower_with_pairs = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const int L = 1 + trial % 4;
    Chain chain = small_chain(rng, L);
    std::mt19937_64 price_rng(static_cast<uint64_t>(trial));
    const bool pair_times = trial % 4 == 3;
    if (pair_times) testing::give_pair_times(chain, price_rng, 0.8, true);
    ++num_chains;
    SCOPED_TRACE("trial " + std::to_string(trial));
    // The fastest plan at a smaller budget fits every larger one: it seeds the bound.
    std::optional<std::vector<Op>> smaller_best;
    double smaller_best_ms = 0;
    for (const int percent : {0, 25, 50, 75, 100}) {
      const int64_t budget = budget_between_floor_and_store_all(chain, percent);
      SCOPED_TRACE("budget " + std::to_string(budget));
      SolveOptions o;
      o.budget_bytes = budget;
      o.slots = static_cast<int>(budget);
      o.num_threads = 1;
      o.find_min_budget = false;
      std::optional<Schedule> optimal;
      try {
        optimal = solve(chain, o);
      } catch (const InfeasibleBudget&) {
      }
      const std::vector<Op>* incumbent = optimal ? &optimal->ops : nullptr;
      if (smaller_best && (!optimal || smaller_best_ms < optimal->predicted.time_ms)) incumbent = &*smaller_best;
      const testing::OracleResult best = testing::fastest_valid_plan(chain, budget, incumbent);
      if (best.ops) { smaller_best = best.ops; smaller_best_ms = best.time_ms; }
      num_nodes += best.num_nodes;
      num_plans += best.num_plans;
      num_oracle_budgets += best.ops.has_value();
      const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
      if (dp) {
        ASSERT_TRUE(best.ops.has_value()) << "the DP found a plan the oracle missed";
        const SimResult r = simulate_timeline(chain, *dp);
        ASSERT_TRUE(r.valid) << r.error;
        EXPECT_LE(r.peak_bytes, budget);
        EXPECT_GE(r.time_ms, best.time_ms);
        ++num_compared;
        num_equal += r.time_ms == best.time_ms;
        num_slower += r.time_ms > best.time_ms;
      } else {
        num_slower += best.ops.has_value();
      }
      // `optimal` (every candidate, the pipelined family included) is held to the
      // same bound.
      if (optimal) {
        ASSERT_TRUE(best.ops.has_value());
        EXPECT_GE(optimal->predicted.time_ms, best.time_ms);
        // Note [A stage run back to back] in solver/chain/chain.h: with back-to-back times
        // a plan may re-run a stage only to run it back to back, which no search of
        // `optimal` tries; those misses are counted apart.
        (pair_times ? num_optimal_slower_with_pairs : num_optimal_slower) += optimal->predicted.time_ms > best.time_ms;
      } else {
        num_optimal_none += best.ops.has_value();  // the oracle's plan fits where no candidate does
      }
      // Store-all fits at 100%: the oracle finds at least that.
      if (percent == 100) {
        ASSERT_TRUE(best.ops.has_value());
        EXPECT_LE(best.time_ms, simulate_sequential(chain, store_all_ops(chain)).time_ms);
      }
    }
  }
  RecordProperty("chains", num_chains);
  RecordProperty("oracle_prefixes_visited", std::to_string(num_nodes));
  RecordProperty("oracle_plans_completed", std::to_string(num_plans));
  RecordProperty("dp_equal_to_oracle", num_equal);
  RecordProperty("dp_slower_than_oracle", num_slower);
  RecordProperty("optimal_slower_than_oracle", num_optimal_slower);
  RecordProperty("optimal_slower_than_oracle_with_back_to_back_times", num_optimal_slower_with_pairs);
  RecordProperty("optimal_without_plan_where_oracle_has_one", num_optimal_none);
  std::printf("oracle: %d chains (L <= 4), %d budgets with a plan, %lld prefixes visited, %lld plans completed; "
              "DP equal at %d of %d budgets, slower at %d; optimal slower at %d (%d more on chains with back-to-back "
              "times), without a plan at %d\n",
              num_chains, num_oracle_budgets, static_cast<long long>(num_nodes), static_cast<long long>(num_plans),
              num_equal, num_compared, num_slower, num_optimal_slower, num_optimal_slower_with_pairs, num_optimal_none);
  EXPECT_GT(num_equal, 80);  // not vacuous: most comparisons are exact matches
  // `optimal` polishes its best candidate (Note [Polishing a plan's copies] in
  // solver/search/polish.h), repairs the DP's plans at larger budgets (Note [Starts over the
  // budget] in solver/search/optimal.cpp) and its best plan with a recomputed stage kept (Note
  // [Starts that keep a recomputed stage]), each with the fastest repair (Note [The
  // best repair first] in solver/search/polish.h), and kicks its plan out of the polish's
  // local optimum (Note [Kicks out of a local optimum] in solver/search/kicks.h): it meets
  // the oracle's time at every budget. Each step was needed: the polish alone missed
  // 12, with the starts over the budget 10, with the kept stages 5, without the
  // recompute move 4, without the DP's recomputed runs and copies through a
  // recomputed segment 2, without the kicks 1 (a plan that checkpoints the last
  // stage and re-runs it with fwd_keep before its backward).
  EXPECT_LT(num_optimal_slower + num_optimal_none, num_slower);
  EXPECT_EQ(num_optimal_slower + num_optimal_none, 0);
  // With back-to-back times (one chain in four) the oracle does find such plans: a
  // stage's last forward run again with fwd_keep right before its backward, paid for by
  // a no-grad forward that costs less than the pair saves. Rare, and counted.
  EXPECT_LE(num_optimal_slower_with_pairs, 2);
}

// Keep every stage, offload every saved state right away and bring it back just
// before its backward: with instant copies this holds, at any moment, only what
// the stage running needs -- its own working set (plus the a_k the hollow states
// keep). Built here by hand, independently of the DP.
std::vector<Op> keep_and_offload_every_saved_state(const Chain& chain) {
  const int L = chain.length();
  std::vector<Op> ops;
  std::vector<bool> moved(L + 1, false);
  for (int i = 0; i < L; ++i) {
    ops.push_back({OpKind::FwdKeep, i});
    // The last stage's copy would overlap the loss alone, which may take no time.
    if (i + 1 < L && chain.xbar(i + 1) > chain.x(i + 1)) {
      ops.push_back({OpKind::OffloadSaved, i + 1});
      moved[i + 1] = true;
    }
  }
  ops.push_back({OpKind::Loss, -1});
  for (int i = L - 1; i >= 0; --i) {
    if (moved[i + 1]) ops.push_back({OpKind::PrefetchSaved, i + 1});
    ops.push_back({OpKind::Bwd, i});
  }
  return ops;
}

TEST(OffloadDp, UnlimitedBandwidthReachesEveryStageOnceWhenEachWorkingSetFits) {
  std::mt19937_64 rng(22);
  int num_below_store_all = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Chain chain = testing::random_byte_chain(rng, 2 + trial % 9, 100000);
    chain.link = Link{1e18, 1e18};
    const SimResult w = simulate_timeline(chain, keep_and_offload_every_saved_state(chain));
    ASSERT_TRUE(w.valid) << w.error;
    // Slot rounding costs at most one slot per size in a sum of fewer than 40.
    const int slots = 4000;
    const int64_t budget = w.peak_bytes + w.peak_bytes / 100 + 1;
    const auto ops = solve_offload(chain, budget, {slots, false, 1});
    ASSERT_TRUE(ops.has_value()) << "trial " << trial;
    const SimResult r = simulate_timeline(chain, *ops);
    ASSERT_TRUE(r.valid) << r.error;
    EXPECT_LE(r.peak_bytes, budget);
    // Each stall of a just-in-time prefetch costs the DP one quantum unit.
    const double tol = (chain.length() + 1) * time_quantum_for(chain).unit_ms + 1e-9;
    EXPECT_NEAR(r.time_ms, sum_fwd_bwd_ms(chain), tol) << "trial " << trial;
    num_below_store_all += w.peak_bytes < simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
  }
  EXPECT_GT(num_below_store_all, 150);
}

TEST(OffloadDp, PrefetchesEarlyEnoughToHideEveryCopyWhenTheBudgetAllows) {
  // Eight equal blocks saving 10x their output; each saved state moves in 1 ms,
  // under the 2 ms forward and 3 ms backward it can hide behind.
  Chain chain = testing::homogeneous_chain(8, 2.0, 3.0, 100, 1000);
  chain.link = Link{900e3, 900e3};
  const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
  const auto ops = solve_offload(chain, store_all * 45 / 100, {2000, false, 1});
  ASSERT_TRUE(ops.has_value());
  const SimResult r = simulate_timeline(chain, *ops);
  ASSERT_TRUE(r.valid) << r.error;
  int prefetches = 0;
  for (const Op& op : *ops) prefetches += op.kind == OpKind::PrefetchSaved;
  EXPECT_GE(prefetches, 5);
  EXPECT_EQ(r.stall_ms, 0.0);
  EXPECT_DOUBLE_EQ(r.time_ms, 8 * 5.0);
  // Recomputation alone pays at least one extra forward at this budget.
  const auto rec = solve_recompute(chain, store_all * 45 / 100, {2000, false, 1});
  ASSERT_TRUE(rec.has_value());
  EXPECT_GE(simulate_sequential(chain, *rec).time_ms, 8 * 5.0 + 2.0);
}

}  // namespace
}  // namespace memopt::solver

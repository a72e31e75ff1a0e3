// solve_test.cpp: the solver's front door (solve.h) -- every SolverKind returns a
// Schedule whose `predicted` is the simulator's and fits the budget; an infeasible
// budget throws InfeasibleBudget naming the smallest budget that works; the solver
// words round-trip.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/chain.h"
#include "solver/dp/offload.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

int64_t store_all_peak(const Chain& chain) {
  return simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
}

SolveOptions options(SolverKind kind, int64_t budget_bytes, int slots = 500) {
  SolveOptions o;
  o.solver = kind;
  o.budget_bytes = budget_bytes;
  o.slots = slots;
  o.num_threads = 1;
  return o;
}

// Random chains with a link (so that Optimal and OffloadAll have something to move)
// or without (so that Optimal is the recompute DP).
Chain solve_chain(std::mt19937_64& rng, int trial) {
  testing::RandomChainOptions o;
  o.length = 1 + trial % 10;
  o.unit_bytes = 1 + static_cast<int64_t>(rng() % 1'000'000);
  o.max_units = 30;
  o.integer_ms = false;
  o.max_ms = 20;
  // Note [A backward may peak below its gradient] in solver/chain/chain.h, one trial in four.
  o.below_gradient_probability = trial % 4 == 1 ? 0.5 : 0.0;
  Chain chain = testing::random_chain(rng, o);
  // Roles for selective and pointwise on two trials in three.
  if (trial % 3 != 0)
    for (Stage& st : chain.stages) st.role = kStageRoles[rng() % std::size(kStageRoles)].value;
  if (trial % 2 == 0) {
    // Bandwidths that make copies comparable to the stage times.
    const double bytes_per_s = static_cast<double>(o.unit_bytes) * 30 * 1000 / 10;
    chain.link = Link{bytes_per_s, bytes_per_s * 0.75};
  }
  return chain;
}

TEST(Solve, EveryKindPredictsWhatTheSimulatorSaysAndFits) {
  std::mt19937_64 rng(21);
  int num_solved[std::size(kSolverKinds)] = {};
  for (int trial = 0; trial < 200; ++trial) {
    const Chain chain = solve_chain(rng, trial);
    const int64_t peak = store_all_peak(chain);
    for (const SolverKindInfo& kind : kSolverKinds) {
      if (!solver_needs(kind.kind, chain).empty()) continue;  // a link, or roles
      for (const double fraction : {0.35, 0.6, 1.0, 1.5}) {
        const int64_t budget = std::max<int64_t>(1, static_cast<int64_t>(fraction * static_cast<double>(peak)));
        SCOPED_TRACE(std::string(kind.word) + ", trial " + std::to_string(trial) + ", budget " + std::to_string(budget));
        SolveOptions o = options(kind.kind, budget);
        o.find_min_budget = false;
        Schedule s;
        try {
          s = solve(chain, o);
        } catch (const InfeasibleBudget& e) {
          EXPECT_EQ(e.store_all_peak_bytes, peak);
          // Not searched: if a smallest budget is named anyway, it is above this one.
          EXPECT_TRUE(e.min_budget_bytes == -1 || e.min_budget_bytes > budget) << e.min_budget_bytes;
          continue;
        } catch (const std::logic_error& e) {
          ADD_FAILURE() << "solver bug: " << e.what();
          continue;
        } catch (const std::runtime_error& e) {
          // Only rotor's recurrence may return a schedule over the budget, and solve
          // must refuse it: check that it really is over.
          ASSERT_EQ(kind.kind, SolverKind::RotorCompat) << e.what();
          DpOptions dp;
          dp.slots = o.slots;
          dp.rotor_compat = true;
          dp.num_threads = 1;
          const auto ops = solve_recompute(chain, budget, dp);
          ASSERT_TRUE(ops.has_value());
          EXPECT_GT(simulate_timeline(chain, *ops).peak_bytes, budget);
          continue;
        }
        ++num_solved[static_cast<int>(kind.kind)];
        const SimResult sim = simulate_timeline(chain, s.ops);
        ASSERT_TRUE(sim.valid) << sim.error;
        EXPECT_EQ(s.predicted.peak_bytes, sim.peak_bytes);
        EXPECT_EQ(s.predicted.time_ms, sim.time_ms);
        EXPECT_LE(s.predicted.peak_bytes, budget);
        EXPECT_EQ(s.budget_bytes, budget);
        EXPECT_EQ(s.chain_length, chain.length());
        EXPECT_EQ(s.solver, kind.word);
        EXPECT_EQ(solver_kind_from_word(s.solver), kind.kind);
        // At 150% of the store-all peak store-all fits in 500 slots (each of its <= 14
        // resident terms rounds up by < 1 slot of 333), so the recompute DP stores all:
        // 1e-9 relative covers time quantisation and is far below any recomputation.
        const bool dp_without_offload = kind.kind == SolverKind::RecomputeOnly || kind.kind == SolverKind::RotorCompat ||
                                        (kind.kind == SolverKind::Optimal && !chain.link);
        if (fraction == 1.5 && (dp_without_offload || kind.kind == SolverKind::StoreAll)) {
          const double store_all_ms = simulate_sequential(chain, store_all_ops(chain)).time_ms;
          EXPECT_LE(s.predicted.time_ms, store_all_ms * (1 + 1e-9));
        }
      }
    }
  }
  for (const SolverKindInfo& kind : kSolverKinds) EXPECT_GT(num_solved[static_cast<int>(kind.kind)], 50) << kind.word;
}

TEST(Solve, InfeasibleBudgetNamesTheSmallestBudgetThatWorks) {
  // min_feasible_budget bisects on the budget; feasibility is monotone in it (larger
  // budget: the same or fewer slots per tensor, the same slot count). We require its
  // answer to be feasible and the answer minus 0.01% of itself (plus one byte) to be
  // infeasible: a resolution well under the DP's own granularity of 1/slots = 0.2%.
  std::mt19937_64 rng(22);
  const SolverKind kinds[] = {SolverKind::Optimal, SolverKind::RecomputeOnly, SolverKind::StoreAll, SolverKind::Sqrt,
                              SolverKind::RecomputeBlocks, SolverKind::RecomputeAll};
  for (int trial = 0; trial < 40; ++trial) {
    const Chain chain = solve_chain(rng, trial);
    const int64_t peak = store_all_peak(chain);
    for (const SolverKind kind : kinds) {
      SCOPED_TRACE(std::string(info(kind).word) + ", trial " + std::to_string(trial));
      // Every schedule holds a_0 from the start: half of it never fits.
      if (chain.input_bytes < 2) continue;
      const int64_t tiny = chain.input_bytes / 2;
      try {
        solve(chain, options(kind, tiny));
        ADD_FAILURE() << "a budget of half the input's size was accepted";
      } catch (const InfeasibleBudget& e) {
        EXPECT_EQ(e.store_all_peak_bytes, peak);
        ASSERT_GT(e.min_budget_bytes, 0) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(e.min_budget_bytes)), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(peak)), std::string::npos) << e.what();
        EXPECT_NO_THROW(solve(chain, options(kind, e.min_budget_bytes)));
        const int64_t below = e.min_budget_bytes - e.min_budget_bytes / 10000 - 1;
        if (below > 0) {
          SolveOptions o = options(kind, below);
          o.find_min_budget = false;
          EXPECT_THROW(solve(chain, o), InfeasibleBudget);
        }
        EXPECT_EQ(min_feasible_budget(chain, options(kind, tiny)), e.min_budget_bytes);
        // A baseline's smallest budget is its simulated peak (to the same resolution).
        const std::vector<Op> baseline_ops = kind == SolverKind::StoreAll          ? store_all_ops(chain)
                                             : kind == SolverKind::Sqrt            ? sqrt_ops(chain)
                                             : kind == SolverKind::RecomputeBlocks ? recompute_blocks_ops(chain)
                                             : kind == SolverKind::RecomputeAll    ? recompute_all_ops(chain)
                                                                                   : std::vector<Op>{};
        if (!baseline_ops.empty()) {
          const int64_t baseline_peak = simulate_sequential(chain, baseline_ops).peak_bytes;
          EXPECT_GE(e.min_budget_bytes, baseline_peak);
          EXPECT_LE(e.min_budget_bytes, baseline_peak + baseline_peak / 10000 + 1);
        }
      }
    }
  }
}

TEST(Solve, RejectsBadRequests) {
  const Chain chain = testing::homogeneous_chain(4, 1.0, 2.0, 100, 400);
  EXPECT_THROW(solve(chain, options(SolverKind::Optimal, 0)), std::invalid_argument);
  EXPECT_THROW(solve(chain, options(SolverKind::Optimal, -5)), std::invalid_argument);
  // offload-all without a link: nothing to offload through.
  EXPECT_THROW(solve(chain, options(SolverKind::OffloadAll, 1'000'000)), std::invalid_argument);
  // selective and pointwise on a chain that marks no stage of their role.
  for (const SolverKind kind : {SolverKind::Selective, SolverKind::Pointwise}) {
    try {
      solve(chain, options(kind, 1'000'000));
      ADD_FAILURE() << info(kind).word << " planned without roles";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--granularity op"), std::string::npos) << e.what();
    }
  }
  Chain bad = chain;
  bad.stages[2].saved_bytes = 10;  // less than out_bytes
  EXPECT_THROW(solve(bad, options(SolverKind::Optimal, 1'000'000)), std::invalid_argument);
}

TEST(Solve, SolverWordsRoundTrip) {
  std::set<std::string_view> words;
  for (const SolverKindInfo& k : kSolverKinds) {
    EXPECT_EQ(solver_kind_from_word(k.word), k.kind);
    EXPECT_EQ(info(k.kind).word, k.word);
    EXPECT_FALSE(k.description.empty());
    words.insert(k.word);
  }
  EXPECT_EQ(words.size(), std::size(kSolverKinds));
  EXPECT_EQ(solver_kind_from_word("Optimal"), std::nullopt);
  EXPECT_EQ(solver_kind_from_word(""), std::nullopt);
  EXPECT_EQ(solver_kind_from_word("store_all"), std::nullopt);  // the CLI word uses a dash
  EXPECT_EQ(solver_kind_from_word("store-all"), SolverKind::StoreAll);
  EXPECT_EQ(solver_kind_from_word("rotor-compat"), SolverKind::RotorCompat);
}

}  // namespace
}  // namespace memopt::solver

namespace memopt::solver {
namespace {

// GPT-2 small with fused attention on an A100 as `memopt estimate` models it (B=8,
// T=1024, fp32): an embedding, 12 blocks that save 16x their output, and a head
// that saves the logits; a 16 GB/s link, over which one block's saved state takes
// 25 ms against a 6.9 ms forward.
Chain gpt2_small_sdpa_a100() {
  Chain chain;
  chain.input_bytes = 65536;
  chain.stages.push_back({"embed", 0.0787, 0.1574, 25165824, 31457280, 56623104, 176344064, 50331648});
  for (int i = 0; i < 12; ++i)
    chain.stages.push_back({"h" + std::to_string(i), 6.9101, 13.8202, 25165824, 415760384, 201326592, 103809024, 50331648});
  chain.stages.push_back({"head", 34.0698, 68.1396, 4, 1672052744, 3293642748, 3268476924, 1646821368});
  chain.link = Link{16e9, 16e9};
  return chain;
}

// Written by hand: recompute stages 0..5 from a_0, offload the saved state of
// stages 6..8 (each copy queues behind the previous one for several forward ops),
// keep 9..13, issue each prefetch four backward ops before it is needed, and
// finally run the prefix again, kept.
std::vector<Op> recomputed_prefix_offloaded_middle(const Chain& chain) {
  const int L = chain.length();
  std::vector<Op> ops{{OpKind::FwdCkpt, 0}};
  for (int k = 1; k < 6; ++k) ops.push_back({OpKind::FwdDrop, k});
  for (int k = 6; k < L; ++k) {
    ops.push_back({OpKind::FwdKeep, k});
    if (k < 9) ops.push_back({OpKind::OffloadSaved, k + 1});
  }
  ops.push_back({OpKind::Loss, -1});
  for (int i = L - 1; i >= 6; --i) {
    for (int k = 8; k >= 6; --k)
      if (k + 4 == i || (i == L - 1 && k + 4 > i)) ops.push_back({OpKind::PrefetchSaved, k + 1});
    ops.push_back({OpKind::Bwd, i});
  }
  for (int k = 0; k < 6; ++k) ops.push_back({OpKind::FwdKeep, k});
  for (int k = 5; k >= 0; --k) ops.push_back({OpKind::Bwd, k});
  return ops;
}

TEST(SolveOptimal, IsAtLeastAsFastAsAPipelinedOffloadPlanWrittenByHand) {
  const Chain chain = gpt2_small_sdpa_a100();
  const int64_t budget = store_all_peak_bytes(chain) * 7 / 10;
  const SimResult hand = simulate_timeline(chain, recomputed_prefix_offloaded_middle(chain));
  ASSERT_TRUE(hand.valid) << hand.error;
  ASSERT_LE(hand.peak_bytes, budget);
  SolveOptions o;
  o.budget_bytes = budget;
  o.num_threads = 1;
  o.solver = SolverKind::RecomputeOnly;
  const Schedule recompute_only = solve(chain, o);
  EXPECT_LT(hand.time_ms, recompute_only.predicted.time_ms);  // the plan is worth having
  o.solver = SolverKind::Optimal;
  const Schedule optimal = solve(chain, o);
  EXPECT_LE(optimal.predicted.time_ms, hand.time_ms);
  std::printf("hand-written %.3f ms, optimal %.3f ms, recompute-only %.3f ms\n", hand.time_ms,
              optimal.predicted.time_ms, recompute_only.predicted.time_ms);
}

// Note [Starts that keep a recomputed stage] in solver/search/optimal.cpp, on a chain worked
// by hand (1 byte = 1 slot, copies of 1000 B/s out and 2000 B/s back). Stage 0 takes
// 6 ms and saves 9 bytes, 4 of them its output; stage 1 takes 4 + 5 ms, stage 2
// 0 + 3 ms. At 26 bytes the DP without runs that end waiting (Note [A copy through a
// kept run] in offload.h) recomputes stage 0 (22 ms: its forward twice). Keeping it
// needs 9 + 6 + 6 bytes beside a_0 and the transients, 2 too many; offloading its 5
// saved bytes right after its forward (5 ms, over by the time stage 1 ends, plus a
// 1 ms wait) and bringing them back behind bwd 1 (2.5 ms against 5) makes it fit:
// 6 + 4 + 1 + 0 + 3 + 5 + 0 = 19 ms. The polish alone cannot get there from the
// narrower classes' plans: it never turns a recomputed stage into a kept one; the
// start that keeps stage 0 does, and the widest class has the plan itself.
TEST(SolveOptimal, KeepsAStageTheDpRecomputesWhenCopiesMakeRoom) {
  Chain chain;
  chain.input_bytes = 4;
  chain.stages.push_back({"s0", 6, 0, 4, 9, 4, 0});
  chain.stages.back().fwd_nograd_ms = 4;
  chain.stages.push_back({"s1", 4, 5, 3, 6, 4, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 4;
  chain.stages.push_back({"s2", 0, 3, 2, 6, 16, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 6;
  chain.stages.back().fwd_nograd_ms = 0;
  chain.link = Link{1000, 2000};
  const int64_t budget = 26;
  const std::vector<Op> by_hand = {{OpKind::FwdKeep, 0},       {OpKind::OffloadSaved, 1}, {OpKind::FwdKeep, 1},
                                   {OpKind::WaitOffloads, -1}, {OpKind::FwdKeep, 2},      {OpKind::Loss, -1},
                                   {OpKind::Bwd, 2},           {OpKind::PrefetchSaved, 1}, {OpKind::Bwd, 1},
                                   {OpKind::Bwd, 0}};
  const SimResult hand = simulate_timeline(chain, by_hand);
  ASSERT_TRUE(hand.valid) << hand.error;
  EXPECT_EQ(hand.peak_bytes, budget);
  EXPECT_EQ(hand.time_ms, 19);
  std::vector<Op> without_copies = by_hand;
  std::erase_if(without_copies, [](const Op& op) { return needs_timeline(op.kind); });
  EXPECT_GT(simulate_sequential(chain, without_copies).peak_bytes, budget);
  const auto narrower = solve_offload(chain, budget, {static_cast<int>(budget), false, 1, OffloadShapes::ThroughKeptRuns});
  ASSERT_TRUE(narrower.has_value());
  EXPECT_EQ(simulate_timeline(chain, *narrower).time_ms, 22);
  const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
  ASSERT_TRUE(dp.has_value());
  EXPECT_EQ(*dp, by_hand);
  SolveOptions o = options(SolverKind::Optimal, budget, static_cast<int>(budget));
  o.find_min_budget = false;
  const Schedule optimal = solve(chain, o);
  EXPECT_EQ(optimal.predicted.time_ms, 19);
  EXPECT_LE(optimal.predicted.peak_bytes, budget);
  for (const Op& op : optimal.ops) EXPECT_NE(op.kind, OpKind::FwdCkpt) << "every stage is kept";
}

// Note [Starts over the budget] in optimal.cpp: a repaired start far slower than the
// best plan so far ends the series of starts. Over a 1 GB/s link the repairs of a
// block-dominated chain slow sharply from one start to the next, and the stop cuts
// the series; over 4 GB/s a later start gives the fastest plan, which stopping after
// the first repaired start that fits (a fraction below -1) would lose. The default
// stop returns the very plans of the whole series in both.
TEST(SolveOptimal, StoppingASeriesOfRepairsChangesNoPlanOnBlockChains) {
  struct Case {
    int L;
    double bytes_per_s;
    int percent;
    bool a_later_start_wins;
  };
  for (const Case c : {Case{16, 1e9, 40, false}, Case{24, 1e9, 30, false}, Case{14, 4e9, 45, true},
                       Case{18, 4e9, 35, true}, Case{18, 4e9, 60, true}}) {
    Chain chain = testing::block_dominated_chain(c.L, 3 + c.L);
    chain.link = Link{c.bytes_per_s, c.bytes_per_s};
    SolveOptions o = options(SolverKind::Optimal, store_all_peak(chain) * c.percent / 100);
    o.find_min_budget = false;
    const Schedule stopped = solve(chain, o);
    o.search.over_budget_stop_fraction = std::numeric_limits<double>::infinity();
    const Schedule whole = solve(chain, o);
    o.search.over_budget_stop_fraction = -2;
    const Schedule first_only = solve(chain, o);
    const std::string where = "L = " + std::to_string(c.L) + " at " + std::to_string(c.percent) + "%";
    EXPECT_EQ(stopped.ops, whole.ops) << where;
    if (c.a_later_start_wins) {
      EXPECT_GT(first_only.predicted.time_ms, whole.predicted.time_ms) << where;
    }
  }
}

// Note [Slot rounding slack]: at coarse slots the plain DP rounds every resident
// object up and misses plans that fit to the byte. recompute-only (which adds the DP
// with slack) is never slower than the plain DP's plan, never faster than the DP at
// byte resolution (slots = budget: exact over persistent schedules, which every
// candidate is), and on these long chains often strictly better than the plain DP.
TEST(SolveRecomputeOnly, SlackRecoversWhatSlotRoundingLoses) {
  std::mt19937_64 rng(31);
  int num_compared = 0, num_better = 0, num_found_only_with_slack = 0;
  for (int trial = 0; trial < 40; ++trial) {
    testing::RandomChainOptions o;
    o.length = 12 + trial % 12;
    o.max_units = 30;
    o.carry_probability = trial % 2 == 0 ? 0.0 : 0.3;
    const Chain chain = testing::random_chain(rng, o);
    SCOPED_TRACE("trial " + std::to_string(trial));
    for (const int percent : {30, 50, 70}) {
      const int64_t budget = store_all_peak(chain) * percent / 100;
      constexpr int kSlots = 40;  // coarse, so that rounding costs many slots
      const auto plain = solve_recompute(chain, budget, {kSlots, false, 1});
      const auto exact = solve_recompute(chain, budget, {static_cast<int>(budget), false, 1});
      std::optional<Schedule> slack;
      try {
        slack = solve(chain, options(SolverKind::RecomputeOnly, budget, kSlots));
      } catch (const InfeasibleBudget&) {
      }
      if (plain) {
        ASSERT_TRUE(slack.has_value());
        const double plain_ms = simulate_sequential(chain, *plain).time_ms;
        EXPECT_LE(slack->predicted.time_ms, plain_ms);
        num_better += slack->predicted.time_ms < plain_ms;
        ++num_compared;
      } else {
        num_found_only_with_slack += slack.has_value();
      }
      if (slack) {
        ASSERT_TRUE(exact.has_value());
        EXPECT_GE(slack->predicted.time_ms, simulate_sequential(chain, *exact).time_ms);
        EXPECT_LE(slack->predicted.peak_bytes, budget);
      }
    }
  }
  std::printf("slack: better than the plain DP at %d of %d budgets, a plan where it had none at %d\n", num_better,
              num_compared, num_found_only_with_slack);
  EXPECT_GT(num_better + num_found_only_with_slack, 20);
}

}  // namespace
}  // namespace memopt::solver

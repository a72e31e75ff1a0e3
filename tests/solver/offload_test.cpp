// offload_test.cpp: oracles for the keep/recompute/offload DP (solver/dp/offload.h) --
// no link means recompute-only, it is never slower than recompute-only, it never
// exceeds the budget, and more budget or more bandwidth never makes it slower; and
// two plans worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "solver/dp/baselines.h"
#include "solver/dp/offload.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "tests/solver/exhaustive_oracle.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

using testing::random_byte_chain;

double simulated_ms(const Chain& chain, const std::vector<Op>& ops) {
  const SimResult r = simulate_timeline(chain, ops);
  EXPECT_TRUE(r.valid) << r.error;
  return r.time_ms;
}

int64_t store_all_peak(const Chain& chain) { return simulate_sequential(chain, store_all_ops(chain)).peak_bytes; }

// Time quantisation (Note [Time quantisation]) makes the DPs compare integer
// units; a simulated difference below one unit per op is rounding, not a loss.
double tolerance_ms(const Chain& chain, size_t num_ops) {
  return static_cast<double>(num_ops) * time_quantum_for(chain).unit_ms;
}

TEST(OffloadDp, WithoutABandwidthItIsTheRecomputeDp) {
  std::mt19937_64 rng(11);
  int num_only_by_waiting = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Chain chain = random_byte_chain(rng, 1 + trial % 8, 1000);
    const int64_t budget = std::max<int64_t>(1, store_all_peak(chain) * (1 + trial % 9) / 10);
    // A link so slow that no copy can hide anywhere: offloading never pays for time.
    // It can still make a plan fit where recomputation alone cannot, by waiting for
    // the copy (Note [Waiting for the previous offload] in offload.h).
    chain.link = Link{1e-3, 1e-3};
    const auto off = solve_offload(chain, budget, {200, false, 1});
    const auto rec = solve_recompute(chain, budget, {200, false, 1});
    if (rec) {
      ASSERT_TRUE(off.has_value()) << "trial " << trial;
      EXPECT_EQ(*off, *rec) << "trial " << trial;
    } else if (off) {
      EXPECT_NE(std::find(off->begin(), off->end(), Op{OpKind::WaitOffloads, -1}), off->end()) << "trial " << trial;
      ++num_only_by_waiting;
    }
  }
  RecordProperty("plans_only_by_waiting", num_only_by_waiting);
}

// Note [Classes to start from] in optimal.cpp skips the search from the class without
// runs that end waiting and kept items that move their input wherever the widest
// class's plans have neither, because that class's DP would return the very same
// plans. Checked on small random chains at budgets across their range, at byte and at
// coarse slots; not vacuous: all three kinds of plan occur.
TEST(OffloadDp, WithoutTheWidestShapesItsPlanIsTheNarrowerClasssPlan) {
  std::mt19937_64 rng(5);
  int num_same = 0, num_waiting = 0, num_moving = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Chain chain = testing::small_chain(rng, 1 + trial % 6, trial % 3 == 2 ? 0.5 : 0.0);
    const int64_t store_all = store_all_peak(chain);
    for (int64_t budget = 1; budget <= store_all; budget += 1 + store_all / 12) {
      for (const int slots : {static_cast<int>(budget), 7}) {
        SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget) + ", slots " +
                     std::to_string(slots));
        const auto widest = solve_offload(chain, budget, {slots, false, 1, OffloadShapes::MovingKeptInputs});
        const auto narrower = solve_offload(chain, budget, {slots, false, 1, OffloadShapes::ThroughKeptRuns});
        if (!widest) {
          EXPECT_FALSE(narrower.has_value());
          continue;
        }
        if (has_waiting_kept_run(*widest) || has_kept_input_move(*widest)) {
          num_waiting += has_waiting_kept_run(*widest);
          num_moving += has_kept_input_move(*widest);
          continue;
        }
        ASSERT_TRUE(narrower.has_value());
        EXPECT_EQ(*narrower, *widest);
        ++num_same;
      }
    }
  }
  EXPECT_GT(num_same, 1000);
  EXPECT_GT(num_waiting, 20);
  EXPECT_GT(num_moving, 20);
}

TEST(OffloadDp, FitsTheBudgetAndIsNeverSlowerThanRecomputeOnly) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> log_bw(5.0, 11.0);
  int num_offloading = 0, num_faster = 0;
  for (int trial = 0; trial < 600; ++trial) {
    Chain chain = random_byte_chain(rng, 2 + trial % 10, 100000);
    const double bw = std::pow(10.0, log_bw(rng));
    chain.link = Link{bw, bw};
    const int64_t budget = std::max<int64_t>(1, store_all_peak(chain) * (1 + trial % 9) / 10);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget));
    const auto off = solve_offload(chain, budget, {200, false, 1});
    const auto rec = solve_recompute(chain, budget, {200, false, 1});
    if (rec) { ASSERT_TRUE(off.has_value()); }
    if (!off) continue;
    const SimResult r = simulate_timeline(chain, *off);
    ASSERT_TRUE(r.valid) << r.error;
    EXPECT_LE(r.peak_bytes, budget);
    bool offloads = false;
    for (const Op& op : *off) offloads |= op.kind == OpKind::Offload;
    num_offloading += offloads;
    if (rec) {
      const double rec_ms = simulated_ms(chain, *rec);
      EXPECT_LE(r.time_ms, rec_ms + tolerance_ms(chain, off->size()));
      num_faster += r.time_ms < rec_ms - 1e-9;
    } else {
      ++num_faster;  // fits where recomputation alone cannot
    }
  }
  // The oracles above must not pass vacuously.
  EXPECT_GT(num_offloading, 10);
  EXPECT_GT(num_faster, 5);
}

// An activation that shares carried bytes with a neighbour cannot leave the device
// (Note [Carried bytes] in chain.h); the DP must not offload one, whatever the
// budget and the link.
TEST(OffloadDp, PlansAreValidWhenActivationsCarryBytes) {
  std::mt19937_64 rng(43);
  int num_plans = 0, num_offloading = 0;
  for (int trial = 0; trial < 300; ++trial) {
    testing::RandomChainOptions o;
    o.length = 2 + trial % 9;
    o.large_tmp_units = 24;
    o.carry_probability = 0.5;
    Chain chain = testing::random_chain(rng, o);
    const double rates[] = {300.0, 1000.0, 4000.0};
    chain.link = Link{rates[trial % 3], rates[(trial / 3) % 3]};
    const int64_t budget = std::max<int64_t>(1, store_all_peak(chain) * (3 + trial % 8) / 10);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget));
    const auto off = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
    if (!off) continue;
    const SimResult r = simulate_timeline(chain, *off);
    ASSERT_TRUE(r.valid) << r.error;
    EXPECT_LE(r.peak_bytes, budget);
    ++num_plans;
    num_offloading += std::find_if(off->begin(), off->end(), [](const Op& op) {
                        return op.kind == OpKind::Offload || op.kind == OpKind::OffloadInput;
                      }) != off->end();
  }
  EXPECT_GT(num_offloading, 10);  // not vacuous: the DP still offloads the inputs that may move
  std::printf("carried chains: %d plans, %d offload an input\n", num_plans, num_offloading);
}

// The skipping tests' chains: random ones of 2 to 12 stages, a third with carried
// bytes, and every eighth a block-dominated one (real sizes: its link's bytes per
// second scaled up to GB/s), over slow, medium and fast links.
Chain chain_of_trial(std::mt19937_64& rng, int trial) {
  testing::RandomChainOptions o;
  o.length = 2 + trial % 11;
  o.carry_probability = trial % 3 == 0 ? 0.5 : 0.0;
  const bool blocks = trial % 8 == 7;
  Chain chain = blocks ? testing::block_dominated_chain(8 + trial % 16, trial) : testing::random_chain(rng, o);
  const double rates[] = {300.0, 3000.0, 30000.0}, scale = blocks ? 1e6 : 1.0;
  chain.link = Link{scale * rates[trial % 3], scale * rates[(trial / 3) % 3]};
  return chain;
}

// Note [States that cannot beat the answer] in offload.cpp: skipping the states and
// items that cannot beat the answer found so far changes no plan, op for op, in any
// class, on chains with and without carried bytes, at byte slots and coarse ones,
// from budgets where only waiting fits to store-all.
TEST(OffloadDp, SkippingBeatenStatesChangesNoPlan) {
  std::mt19937_64 rng(47);
  int num_plans = 0, num_offloading = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const Chain chain = chain_of_trial(rng, trial);
    const int64_t store_all = store_all_peak(chain);
    for (const int tenths : {2, 4, 6, 10}) {
      const int64_t budget = std::max<int64_t>(1, store_all * tenths / 10);
      for (const OffloadShapes shapes : {OffloadShapes::Windowed, OffloadShapes::ThroughRecomputation,
                                         OffloadShapes::ThroughKeptRuns, OffloadShapes::WaitingKeptRuns,
                                         OffloadShapes::MovingKeptInputs}) {
        SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget) + ", shapes " +
                     std::to_string(static_cast<int>(shapes)));
        DpOptions skipping{trial % 2 ? 200 : static_cast<int>(std::min<int64_t>(budget, 4000)), false, 1, shapes};
        DpOptions every = skipping;
        every.skip_beaten_states = false;
        const auto fast = solve_offload(chain, budget, skipping);
        const auto plain = solve_offload(chain, budget, every);
        ASSERT_EQ(fast.has_value(), plain.has_value());
        if (!fast) continue;
        EXPECT_EQ(*fast, *plain);
        ++num_plans;
        num_offloading += std::any_of(fast->begin(), fast->end(), [](const Op& op) { return is_offload(op.kind); });
      }
    }
  }
  EXPECT_GT(num_plans, 2000);
  EXPECT_GT(num_offloading, 300);  // not vacuous: most of these plans move data
}

// Note [The DP's memory kept between solves] in offload.h: a memory that other solves
// used before, on other chains, budgets, slots and classes, reserved for more states
// than a solve needs or grown by one that needs more, gives every solve the plan and
// the answer of a fresh one.
TEST(OffloadDp, AMemoryUsedByOtherSolvesChangesNoPlan) {
  std::mt19937_64 rng(2718);
  OffloadDpMemory shared;
  shared.reserve(12, 300);
  int num_plans = 0, num_offloading = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const Chain chain = chain_of_trial(rng, trial);
    const int64_t store_all = store_all_peak(chain);
    for (const int tenths : {5, 8}) {
      const int64_t budget = std::max<int64_t>(1, store_all * tenths / 10);
      const OffloadShapes shapes = trial % 3 == 0 ? OffloadShapes::Windowed : OffloadShapes::MovingKeptInputs;
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget));
      const DpOptions options{trial % 5 == 4 ? 700 : 100 + 50 * (trial % 4), false, 1, shapes};
      OffloadAnswer fresh_answer, shared_answer;
      const auto fresh = solve_offload(chain, budget, options, nullptr, nullptr, &fresh_answer);
      const auto reused = solve_offload(chain, budget, options, &shared, nullptr, &shared_answer);
      ASSERT_EQ(fresh.has_value(), reused.has_value());
      EXPECT_EQ(shared_answer.units, fresh_answer.units);
      if (!fresh) continue;
      EXPECT_EQ(*reused, *fresh);
      ++num_plans;
      num_offloading += std::any_of(fresh->begin(), fresh->end(), [](const Op& op) { return is_offload(op.kind); });
    }
  }
  EXPECT_GT(num_plans, 150);
  EXPECT_GT(num_offloading, 100);  // not vacuous: the DP's ways back, which are never cleared, are read
}

// Notes [Rows whose copy has ended], [Waited rows merged], [KR runs by row] and [C
// items by row] in offload.cpp: expanding the states whose offloaded input has
// finished copying, or whose start waits for that copy, once per prefetch size, and
// the KR runs and C items of a row length by length, out of the plain loop order,
// changes no answer and no plan, op for op (Note [Ties broken as the plain order
// would]), in any class, with and without skipping beaten states, on random chains
// and on block chains, whose inputs all have one size.
TEST(OffloadDp, ExpandingOutOfThePlainOrderChangesNoPlan) {
  std::mt19937_64 rng(4711);
  int num_plans = 0, num_prefetching = 0, num_waiting = 0;
  int64_t rows_merged = 0, waits_merged = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Chain chain = trial % 2 ? chain_of_trial(rng, trial) : testing::block_dominated_chain(6 + trial % 14, trial);
    if (trial % 2 == 0) chain.link = Link{trial % 4 ? 1e9 : 1e10, trial % 8 < 4 ? 1e9 : 3e9};
    const int64_t store_all = store_all_peak(chain);
    for (const int tenths : {2, 3, 5, 8}) {
      const int64_t budget = std::max<int64_t>(1, store_all * tenths / 10);
      for (const OffloadShapes shapes : {OffloadShapes::Windowed, OffloadShapes::ThroughKeptRuns,
                                         OffloadShapes::MovingKeptInputs}) {
        for (const bool skip : {true, false}) {
          SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget) + ", shapes " +
                       std::to_string(static_cast<int>(shapes)) + ", skipping " + std::to_string(skip));
          // Slots of one byte on the small random chains, where sizes often sum to exactly the budget.
          const int slots = trial % 4 == 1 ? static_cast<int>(std::min<int64_t>(budget, 4000)) : trial % 3 ? 200 : 500;
          DpOptions fast_order{slots, false, 1, shapes};
          fast_order.skip_beaten_states = skip;
          DpOptions plain = fast_order;
          plain.plain_expansion = true;
          OffloadAnswer merged_answer, plain_answer;
          const auto fast = solve_offload(chain, budget, fast_order, nullptr, nullptr, &merged_answer);
          const auto reference = solve_offload(chain, budget, plain, nullptr, nullptr, &plain_answer);
          ASSERT_EQ(fast.has_value(), reference.has_value());
          EXPECT_EQ(plain_answer.rows_merged, 0);
          rows_merged += merged_answer.rows_merged;
          waits_merged += merged_answer.waits_merged;
          if (!fast) continue;
          EXPECT_EQ(merged_answer.units, plain_answer.units);
          EXPECT_EQ(*fast, *reference);
          ++num_plans;
          num_prefetching +=
              std::any_of(fast->begin(), fast->end(), [](const Op& op) { return op.kind == OpKind::Prefetch; });
          num_waiting +=
              std::any_of(fast->begin(), fast->end(), [](const Op& op) { return op.kind == OpKind::WaitOffloads; });
        }
      }
    }
  }
  EXPECT_GT(num_plans, 1500);
  EXPECT_GT(num_prefetching, 200);  // not vacuous: many plans bring an offloaded input back
  EXPECT_GT(rows_merged, 10000);    // and many rows were merged on the way,
  EXPECT_GT(waits_merged, 1000);     // many of them for their starts that wait,
  EXPECT_GT(num_waiting, 50);        // and many plans wait for a copy
  std::printf("%d plans, %d prefetch, %d wait; %lld rows merged, %lld for their waits\n", num_plans, num_prefetching,
              num_waiting, static_cast<long long>(rows_merged), static_cast<long long>(waits_merged));
}

// Note [An answer known in advance] in offload.h: the class's answer at a smaller
// budget, with slots no coarser and no more, bounds its answer at the larger one, and
// starting the DP from a bound -- that one, the exact answer, or one too low, which
// makes it solve again without -- changes no plan, op for op, and no answer.
TEST(OffloadDp, AnAnswerKnownInAdvanceChangesNoPlan) {
  std::mt19937_64 rng(4747);
  int num_bounded = 0, num_tight = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const Chain chain = chain_of_trial(rng, trial);
    const int64_t store_all = store_all_peak(chain);
    for (const OffloadShapes shapes : {OffloadShapes::Windowed, OffloadShapes::ThroughRecomputation,
                                       OffloadShapes::MovingKeptInputs}) {
      for (const int tenths : {3, 5}) {
        const int64_t smaller = std::max<int64_t>(1, store_all * tenths / 10);
        const int slots = trial % 2 ? 200 : static_cast<int>(std::min<int64_t>(smaller, 2000));
        OffloadAnswer there;
        if (!solve_offload(chain, smaller, {slots, false, 1, shapes}, nullptr, nullptr, &there)) continue;
        ASSERT_TRUE(there.units);
        for (const int eighths : {1, 3}) {
          const int64_t larger = smaller + (store_all - smaller) * eighths / 8;
          // The slot size kept, or coarser where the slot count is capped, as optimal's starts do.
          const int64_t same_size = static_cast<int64_t>(static_cast<__int128>(slots) * larger / smaller);
          for (const int64_t wide : {same_size, std::min<int64_t>(same_size, slots + slots / 4)}) {
            SCOPED_TRACE("trial " + std::to_string(trial) + ", shapes " + std::to_string(static_cast<int>(shapes)) +
                         ", budget " + std::to_string(larger) + ", slots " + std::to_string(wide));
            const DpOptions here{static_cast<int>(wide), false, 1, shapes};
            ASSERT_TRUE(answer_bounds(smaller, slots, larger, here.slots));
            OffloadAnswer plain;
            const auto reference = solve_offload(chain, larger, here, nullptr, nullptr, &plain);
            ASSERT_TRUE(reference);  // the smaller budget's plan fits here
            EXPECT_LE(*plain.units, *there.units);
            for (const int64_t bound : {*there.units, *plain.units, *plain.units - 1}) {
              OffloadAnswer known;
              known.at_most_units = bound;
              const auto bounded = solve_offload(chain, larger, here, nullptr, nullptr, &known);
              ASSERT_TRUE(bounded);
              EXPECT_EQ(*bounded, *reference);
              EXPECT_EQ(known.units, plain.units);
              EXPECT_EQ(known.solved_again, bound < *plain.units);  // a bound that holds is enough
            }
            ++num_bounded;
            num_tight += *plain.units < *there.units;
          }
        }
      }
    }
  }
  EXPECT_GT(num_bounded, 500);
  EXPECT_GT(num_tight, 200);  // not vacuous: the larger budget's answer is often lower
  EXPECT_FALSE(answer_bounds(100, 10, 200, 30));  // finer slots there
  EXPECT_FALSE(answer_bounds(100, 10, 90, 10));   // a smaller budget
  EXPECT_TRUE(answer_bounds(100, 10, 200, 20));
}

TEST(OffloadDp, MoreBudgetOrBandwidthNeverMakesItSlower) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 120; ++trial) {
    Chain chain = random_byte_chain(rng, 2 + trial % 8, 100000);
    const int64_t peak = store_all_peak(chain);
    double previous_ms = std::numeric_limits<double>::infinity();
    chain.link = Link{1e8, 1e8};
    for (int tenth = 1; tenth <= 10; ++tenth) {
      // A fixed slot size across budgets keeps rounding from masking monotonicity.
      const int64_t budget = peak * tenth / 10;
      const auto ops = solve_offload(chain, budget, {20 * tenth, false, 1});
      if (!ops) continue;
      const double ms = simulated_ms(chain, *ops);
      EXPECT_LE(ms, previous_ms + tolerance_ms(chain, ops->size())) << "trial " << trial << " at " << tenth << "/10";
      previous_ms = std::min(previous_ms, ms);
    }
    const int64_t budget = peak / 3;
    previous_ms = std::numeric_limits<double>::infinity();
    for (const double bw : {1e5, 1e7, 1e9, 1e11}) {
      chain.link = Link{bw, bw};
      const auto ops = solve_offload(chain, budget, {200, false, 1});
      if (!ops) continue;
      const double ms = simulated_ms(chain, *ops);
      EXPECT_LE(ms, previous_ms + tolerance_ms(chain, ops->size())) << "trial " << trial << " at " << bw << " B/s";
      previous_ms = std::min(previous_ms, ms);
    }
  }
}

// Worked by hand (Note [A copy through a kept run] in offload.h). a_0 (4 B) goes out
// at once and takes 8 ms at 500 B/s, while stages 1 and 2 are kept:
//   fwd_ckpt 0  0-0    offload 0 0-8   fwd_keep 1 0-4   fwd_keep 2 4-9 (the copy ends in it)
//   bwd 2 9-9   prefetch 0 9-17   bwd 1 9-11   fwd_keep 0 17-17   bwd 0 17-19
// Both kept forwards start while the copy runs and hold its bytes: `fwd_keep 1` peaks
// at a_0 + a_1 + ā_2 + its transient = 4 + 2 + 6 + 17 = 29 B, as does `bwd 2`
// (a_1 + ā_2 + ā_3 + d_3 + d_2 + its transient = 2 + 6 + 2 + 2 + 6 + 11). The
// prefetch is issued inside the run, before `bwd 1`: before `bwd 2` it would peak at
// 33, after `bwd 1` it is exposed, 21 ms. Without copies running on through a kept
// run, the best plan at 31 B checkpoints stage 1 and re-runs it after the loss, with
// the prefetch inside that run (Note [A recomputed run]): 22 ms; at 29 B, and in the
// windowed class at both, the plan waits for the link or recomputes: 27 ms. With
// kept items that move their input (Note [A kept item that moves its input]), the
// plan at 31 B keeps a_0 and moves a_1 (2 B, 4 ms) once stage 1 has run:
//   fwd_ckpt 0  0-0   fwd_keep 1 0-4   offload_input 1 4-8   fwd_keep 2 4-9
//   bwd 2 9-9   prefetch_input 1 9-13   bwd 1 13-15   fwd_keep 0 15-15   bwd 0 15-17
// 17 ms; `bwd 2` then holds a_0 (4 B) where the plan above holds a_1 (2 B): 31 B.
// Recompute-only needs a_0 on the device all along and does not fit at all.
TEST(OffloadDp, LetsACopyRunThroughAKeptRunAndHidesItsPrefetchInsideIt) {
  Chain chain;
  chain.input_bytes = 4;
  chain.stages.push_back({"s0", 0, 2, 2, 6, 0, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 5;
  chain.stages.back().fwd_nograd_ms = 0;
  chain.stages.push_back({"s1", 4, 2, 6, 6, 14, 4});
  chain.stages.back().fwd_keep_tmp_bytes = 17;
  chain.stages.back().fwd_nograd_ms = 3;
  chain.stages.push_back({"s2", 5, 0, 2, 2, 2, 11});
  chain.link = Link{500, 500};
  using K = OpKind;
  const std::vector<Op> by_hand = {{K::FwdCkpt, 0}, {K::Offload, 0}, {K::FwdKeep, 1},  {K::FwdKeep, 2},
                                   {K::Loss, -1},   {K::Bwd, 2},     {K::Prefetch, 0}, {K::Bwd, 1},
                                   {K::FwdKeep, 0}, {K::Bwd, 0}};
  const SimResult r = simulate_timeline(chain, by_hand);
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_EQ(r.time_ms, 19);
  EXPECT_EQ(r.peak_bytes, 29);
  std::vector<Op> earlier = by_hand;
  std::rotate(earlier.begin() + 5, earlier.begin() + 6, earlier.begin() + 7);  // prefetch 0 before bwd 2
  EXPECT_EQ(simulate_timeline(chain, earlier).peak_bytes, 33);
  std::vector<Op> just_in_time = by_hand;
  std::rotate(just_in_time.begin() + 6, just_in_time.begin() + 7, just_in_time.begin() + 8);  // after bwd 1
  EXPECT_EQ(simulate_timeline(chain, just_in_time).time_ms, 21);
  const std::vector<Op> moving_a_1 = {{K::FwdCkpt, 0},      {K::FwdKeep, 1}, {K::OffloadInput, 1}, {K::FwdKeep, 2},
                                      {K::Loss, -1},        {K::Bwd, 2},     {K::PrefetchInput, 1}, {K::Bwd, 1},
                                      {K::FwdKeep, 0},      {K::Bwd, 0}};
  const SimResult moving = simulate_timeline(chain, moving_a_1);
  ASSERT_TRUE(moving.valid) << moving.error;
  EXPECT_EQ(moving.time_ms, 17);
  EXPECT_EQ(moving.peak_bytes, 31);
  const std::vector<Op> recomputed_run = {{K::FwdCkpt, 0}, {K::Offload, 0},  {K::FwdCkpt, 1}, {K::FwdKeep, 2},
                                          {K::Loss, -1},   {K::Bwd, 2},      {K::FwdKeep, 1}, {K::Prefetch, 0},
                                          {K::Bwd, 1},     {K::FwdKeep, 0},  {K::Bwd, 0}};
  const SimResult before = simulate_timeline(chain, recomputed_run);
  ASSERT_TRUE(before.valid) << before.error;
  EXPECT_EQ(before.time_ms, 22);
  EXPECT_EQ(before.peak_bytes, 31);

  for (const int64_t budget : {29, 31}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    EXPECT_FALSE(solve_recompute(chain, budget, {static_cast<int>(budget), false, 1}).has_value());
    const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1, OffloadShapes::WaitingKeptRuns});
    ASSERT_TRUE(dp.has_value());
    EXPECT_EQ(*dp, by_hand);
    EXPECT_EQ(*solve_offload(chain, budget, {static_cast<int>(budget), false, 1, OffloadShapes::ThroughKeptRuns}),
              by_hand);
    const auto widest = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
    ASSERT_TRUE(widest.has_value());
    EXPECT_EQ(*widest, budget == 31 ? moving_a_1 : by_hand);
    const auto recomputing = solve_offload(chain, budget, {static_cast<int>(budget), false, 1,
                                                           OffloadShapes::ThroughRecomputation});
    ASSERT_TRUE(recomputing.has_value());
    if (budget == 31) {
      EXPECT_EQ(*recomputing, recomputed_run);
    } else {
      EXPECT_EQ(simulate_timeline(chain, *recomputing).time_ms, 27);
    }
    const auto windowed = solve_offload(chain, budget, {static_cast<int>(budget), false, 1, OffloadShapes::Windowed});
    ASSERT_TRUE(windowed.has_value());
    EXPECT_EQ(simulate_timeline(chain, *windowed).time_ms, 27);
  }
}

// Worked by hand (Note [A copy through a kept run] in offload.h): ā_1's saved part
// (4 B) leaves after `fwd_keep 0` and takes 4 ms at 1000 B/s, from 10 to 14, while
// `fwd_keep 1` (10-13) holds its bytes. The loss needs the copy gone (a_0 + ā_1 +
// ā_2 + d_2 + its transient = 1 + 5 + 2 + 1 + 6 = 15 B with it, 11 without), so the
// run waits for it after `fwd_keep 1`, 1 ms:
//   fwd_keep 0 0-10   offload_saved 1 10-14   fwd_keep 1 10-13   wait 13-14   loss 14
//   prefetch_saved 1 14-18   bwd 1 14-15 (holding it: 10 B)   bwd 0 18-19
// Waiting before `fwd_keep 1`, the one place the DP could wait before, costs 4 ms
// (22 ms); recompute-only re-runs stage 0's 10 ms (25 ms).
TEST(OffloadDp, LetsAKeptRunWaitForTheCopyItRunsThrough) {
  Chain chain;
  chain.input_bytes = 1;
  chain.stages.push_back({"s0", 10, 1, 1, 5, 0, 0});
  chain.stages.push_back({"s1", 3, 1, 1, 2, 0, 0});
  chain.loss.bwd_tmp_bytes = 6;
  chain.link = Link{1000, 1000};
  const int64_t budget = 11;
  using K = OpKind;
  const std::vector<Op> by_hand = {{K::FwdKeep, 0},       {K::OffloadSaved, 1}, {K::FwdKeep, 1}, {K::WaitOffloads, -1},
                                   {K::Loss, -1},         {K::PrefetchSaved, 1}, {K::Bwd, 1},     {K::Bwd, 0}};
  const SimResult r = simulate_timeline(chain, by_hand);
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_EQ(r.time_ms, 19);
  EXPECT_EQ(r.peak_bytes, budget);
  std::vector<Op> waiting_first = by_hand;
  std::rotate(waiting_first.begin() + 2, waiting_first.begin() + 3, waiting_first.begin() + 4);  // wait, fwd_keep 1
  EXPECT_EQ(simulate_timeline(chain, waiting_first).time_ms, 22);
  std::vector<Op> no_wait = by_hand;
  no_wait.erase(no_wait.begin() + 3);
  EXPECT_EQ(simulate_timeline(chain, no_wait).peak_bytes, 15);
  const auto recompute = solve_recompute(chain, budget, {static_cast<int>(budget), false, 1});
  ASSERT_TRUE(recompute.has_value());
  EXPECT_EQ(simulate_timeline(chain, *recompute).time_ms, 25);
  EXPECT_EQ(testing::fastest_valid_plan(chain, budget).time_ms, 19);  // nothing the simulator accepts is faster

  const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
  ASSERT_TRUE(dp.has_value());
  EXPECT_EQ(*dp, by_hand);
  EXPECT_TRUE(has_waiting_kept_run(*dp));
  const auto without = solve_offload(chain, budget, {static_cast<int>(budget), false, 1,
                                                     OffloadShapes::ThroughKeptRuns});
  ASSERT_TRUE(without.has_value());
  EXPECT_EQ(simulate_timeline(chain, *without).time_ms, 22);
  EXPECT_FALSE(has_waiting_kept_run(*without));
}

// Worked by hand too: ā_1's saved part (3 B) leaves after `fwd_keep 0` and takes
// 6 ms, from 1 to 7; `fwd_ckpt 1` (no-grad, 2 ms) and `fwd_drop 2` (0 ms) end at 3,
// and the copy ends inside `fwd_keep 3` (3-8), which holds its bytes until then. The
// backward re-runs 1..2 with fwd_keep, brings ā_1 back after them (17-23) and bwd 0
// starts at 25: 31 ms. Waiting for the copy before `fwd_ckpt 1` costs 37 ms, before
// `fwd_keep 3` 35.
TEST(OffloadDp, LetsASavedStateCopyRunThroughARecomputedSegment) {
  Chain chain;
  chain.stages.push_back({"s0", 1, 6, 5, 8, 2, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 3;
  chain.stages.push_back({"s1", 3, 5, 3, 3, 6, 5});
  chain.stages.back().fwd_keep_tmp_bytes = 0;
  chain.stages.back().fwd_nograd_ms = 2;
  chain.stages.push_back({"s2", 0, 3, 5, 8, 6, 4});
  chain.stages.back().fwd_keep_tmp_bytes = 1;
  chain.stages.back().fwd_nograd_ms = 0;
  chain.stages.push_back({"s3", 5, 6, 3, 3, 5, 10});
  chain.stages.back().fwd_keep_tmp_bytes = 0;
  chain.stages.back().fwd_nograd_ms = 1;
  chain.loss.bwd_tmp_bytes = 4;
  chain.link = Link{500, 500};
  const int64_t budget = 33;
  using K = OpKind;
  const std::vector<Op> by_hand = {{K::FwdKeep, 0}, {K::OffloadSaved, 1}, {K::FwdCkpt, 1}, {K::FwdDrop, 2},
                                   {K::FwdKeep, 3}, {K::Loss, -1},        {K::Bwd, 3},     {K::FwdKeep, 1},
                                   {K::FwdKeep, 2}, {K::PrefetchSaved, 1}, {K::Bwd, 2},    {K::Bwd, 1},
                                   {K::Bwd, 0}};
  const SimResult r = simulate_timeline(chain, by_hand);
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_EQ(r.time_ms, 31);
  EXPECT_LE(r.peak_bytes, budget);
  for (const auto& [at, ms] : {std::pair{2, 37}, std::pair{4, 35}}) {
    std::vector<Op> waiting = by_hand;
    waiting.insert(waiting.begin() + at, Op{K::WaitOffloads, -1});
    EXPECT_EQ(simulate_timeline(chain, waiting).time_ms, ms);
  }

  const auto dp = solve_offload(chain, budget, {static_cast<int>(budget), false, 1});
  ASSERT_TRUE(dp.has_value());
  EXPECT_EQ(simulated_ms(chain, *dp), 31);
  EXPECT_EQ(*dp, by_hand);
  EXPECT_EQ(testing::fastest_valid_plan(chain, budget).time_ms, 31);
}

TEST(OffloadAll, ChecksEveryInputOutAndBackAndMatchesItsCost) {
  Chain chain;
  chain.input_bytes = 100;
  for (int i = 0; i < 6; ++i) chain.stages.push_back({"b", 2.0, 3.0, 100, 400, 0, 0});
  chain.link = Link{1e9, 1e9};
  const std::vector<Op> ops = offload_all_ops(chain);
  const SimResult r = simulate_timeline(chain, ops);
  ASSERT_TRUE(r.valid) << r.error;
  int offloads = 0, prefetches = 0;
  for (const Op& op : ops) {
    offloads += op.kind == OpKind::Offload;
    prefetches += op.kind == OpKind::Prefetch;
  }
  EXPECT_EQ(offloads, 5);  // every stage input but the last stage's
  EXPECT_EQ(prefetches, 5);
  // Copies of 100 B at 1 GB/s take 1e-4 ms, hidden behind 2-3 ms ops: the time is
  // recompute_blocks' (2L-1)uf + L ub.
  EXPECT_NEAR(r.time_ms, 11 * 2.0 + 6 * 3.0, 1e-9);
  EXPECT_LT(r.peak_bytes, simulate_sequential(chain, recompute_blocks_ops(chain)).peak_bytes);
}

}  // namespace
}  // namespace memopt::solver

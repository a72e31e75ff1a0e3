// dp_bruteforce_test.cpp: the recompute DP of docs/formats.md, "The recompute DP" against an exhaustive
// search over every persistent schedule (tests/solver/brute_force.h) on chains of 1-5
// stages: same feasibility, same optimal time, and a schedule that really fits.
//
// Note [Exact comparisons with the brute force]
// The DP rounds sizes up to slots of budget/slots and times to a quantum of
// time_quantum_for(chain). When every size is a multiple of budget/slots the rounding
// is the identity, and when every time is an integer number of ms the quantum (a power
// of two <= 1 ms for these small chains) represents it exactly. Then the DP solves the
// same problem as the brute force and its schedule must simulate to exactly the
// optimum, compared with ==. With arbitrary sizes the rounding can only lose: the DP
// may miss schedules, never invent one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "tests/solver/brute_force.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

using testing::Evaluated;

constexpr int kMaxLength = 5;

// The persistent schedules of each length, enumerated once for the whole file.
const std::vector<std::vector<Op>>& schedules_of(int L) {
  static const std::vector<std::vector<std::vector<Op>>> all = [] {
    std::vector<std::vector<std::vector<Op>>> v(kMaxLength + 1);
    for (int l = 1; l <= kMaxLength; ++l) v[l] = testing::all_persistent_schedules(l);
    return v;
  }();
  return all.at(L);
}

// A key per op list that does not go through the solver's printing code.
std::vector<int> key_of(const std::vector<Op>& ops) {
  std::vector<int> key;
  for (const Op& op : ops) key.push_back(static_cast<int>(op.kind) * 1000 + op.index + 1);
  return key;
}

const std::map<std::vector<int>, size_t>& index_of(int L) {
  static const std::vector<std::map<std::vector<int>, size_t>> all = [] {
    std::vector<std::map<std::vector<int>, size_t>> v(kMaxLength + 1);
    for (int l = 1; l <= kMaxLength; ++l)
      for (size_t i = 0; i < schedules_of(l).size(); ++i) v[l][key_of(schedules_of(l)[i])] = i;
    return v;
  }();
  return all.at(L);
}

DpOptions dp_options(int slots, bool rotor_compat = false, int num_threads = 1) {
  DpOptions o;
  o.slots = slots;
  o.rotor_compat = rotor_compat;
  o.num_threads = num_threads;
  return o;
}

TEST(BruteForce, EnumeratesTheLargeSchroederNumbersOfDistinctValidSchedules) {
  const int64_t expected[kMaxLength + 1] = {0, 2, 6, 22, 90, 394};
  std::mt19937_64 rng(1);
  for (int L = 1; L <= kMaxLength; ++L) {
    const auto& schedules = schedules_of(L);
    EXPECT_EQ(static_cast<int64_t>(schedules.size()), expected[L]) << "L=" << L;
    EXPECT_EQ(testing::num_persistent_schedules(L), expected[L]) << "L=" << L;
    std::set<std::vector<int>> distinct;
    for (const auto& ops : schedules) distinct.insert(key_of(ops));
    EXPECT_EQ(distinct.size(), schedules.size()) << "L=" << L;
    // Each one is valid (evaluate_all throws otherwise), runs every backward and the
    // loss exactly once, and takes at least Σ(uf+ub).
    testing::RandomChainOptions o;
    o.length = L;
    const Chain chain = testing::random_chain(rng, o);
    const auto evaluated = testing::evaluate_all(chain, schedules);
    double lower_bound = chain.loss.bwd_ms;
    for (int i = 0; i < L; ++i) lower_bound += chain.uf(i) + chain.ub(i);
    for (size_t i = 0; i < schedules.size(); ++i) {
      EXPECT_GE(evaluated[i].time_ms, lower_bound);
      std::vector<int> num_bwd(L, 0);
      int num_loss = 0;
      for (const Op& op : schedules[i]) {
        if (op.kind == OpKind::Bwd) ++num_bwd.at(op.index);
        if (op.kind == OpKind::Loss) ++num_loss;
      }
      EXPECT_EQ(num_loss, 1);
      EXPECT_EQ(std::count(num_bwd.begin(), num_bwd.end(), 1), L);
    }
  }
}

// Exact sizes (multiples of the unit) and integer-ms times: see Note [Exact
// comparisons with the brute force].
struct ExactCase {
  Chain chain;
  int64_t unit_bytes;
  std::vector<Evaluated> evaluated;
  int64_t max_peak_units;
};

ExactCase exact_case(std::mt19937_64& rng, int L, double large_tmp_probability = 0.15, double carry_probability = 0,
                     double below_gradient_probability = 0, double pair_time_probability = 0) {
  static const int64_t units[] = {1, 7, 4096, 1'000'003};
  testing::RandomChainOptions o;
  o.length = L;
  o.unit_bytes = units[rng() % 4];
  o.max_units = 8;
  o.large_tmp_probability = large_tmp_probability;
  o.large_tmp_units = 40;
  o.integer_ms = true;
  o.max_ms = 9;
  o.carry_probability = carry_probability;
  o.below_gradient_probability = below_gradient_probability;
  o.pair_time_probability = pair_time_probability;
  ExactCase c{testing::random_chain(rng, o), o.unit_bytes, {}, 0};
  c.evaluated = testing::evaluate_all(c.chain, schedules_of(L));
  for (const Evaluated& e : c.evaluated) c.max_peak_units = std::max(c.max_peak_units, e.peak_bytes / c.unit_bytes);
  return c;
}

struct ExactComparison {
  int num_feasible = 0, num_infeasible = 0;
  int num_carrying = 0;           // chains with carried bytes
  int num_only_with_sharing = 0;  // budgets where counting them twice loses the optimum
  int num_below_gradient = 0;     // chains with a backward that peaks below its gradient
  int num_pair_timed = 0;         // chains with a back-to-back time
  int num_only_with_prices = 0;   // budgets where one price per op gives another optimum
};

bool has_pair_times(const Chain& chain) {
  for (const Stage& s : chain.stages)
    if (s.fwd_bwd_pair_ms) return true;
  return false;
}

bool peaks_below_gradient(const Chain& chain) {
  for (const Stage& s : chain.stages)
    if (s.bwd_tmp_bytes < 0) return true;
  return false;
}

// The DP against the brute force at every budget from nothing fits to beyond
// store-all, on `trials` exact cases; with carry_probability > 0 only chains that
// carry bytes (Note [Carried bytes] in solver/chain/chain.h) are compared, and likewise
// with below_gradient_probability > 0 only chains with a negative btmp_i.
void compare_with_brute_force(uint64_t seed, int trials, double carry_probability, ExactComparison& out,
                              double below_gradient_probability = 0, double pair_time_probability = 0) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const int L = 1 + trial % kMaxLength;
    const ExactCase c = exact_case(rng, L, 0.15, carry_probability, below_gradient_probability,
                                   pair_time_probability);
    if (carry_probability > 0 && !c.chain.carries()) continue;
    if (below_gradient_probability > 0 && !peaks_below_gradient(c.chain)) continue;
    if (pair_time_probability > 0 && !has_pair_times(c.chain)) continue;
    ASSERT_EQ(validate(c.chain), "");
    if (c.chain.carries()) ++out.num_carrying;
    if (peaks_below_gradient(c.chain)) ++out.num_below_gradient;
    if (has_pair_times(c.chain)) ++out.num_pair_timed;
    Chain counted_twice = c.chain;
    for (Stage& st : counted_twice.stages) st.carried_bytes = 0;
    const auto twice = testing::evaluate_all(counted_twice, schedules_of(L));
    Chain one_price = c.chain;
    drop_pair_times(one_price);
    const auto unpriced = testing::evaluate_all(one_price, schedules_of(L));
    // Note [Exact comparisons with the brute force]: integer ms are exact in the quantum.
    const double unit_ms = time_quantum_for(c.chain).unit_ms;
    ASSERT_LE(unit_ms, 1.0);
    ASSERT_EQ(std::ldexp(1.0, std::ilogb(unit_ms)), unit_ms) << "not a power of two";
    // Every budget in whole units; slots is n or 2n units of budget/slots (both exact).
    for (int64_t n = 1; n <= c.max_peak_units + 2; ++n) {
      const int64_t budget = n * c.unit_bytes;
      const int slots = static_cast<int>(n * (1 + (n + trial) % 2));
      SCOPED_TRACE("trial " + std::to_string(trial) + ", L=" + std::to_string(L) + ", budget=" +
                   std::to_string(budget) + ", slots=" + std::to_string(slots));
      const std::optional<Evaluated> best = testing::fastest_fitting(c.evaluated, budget);
      const auto ops = solve_recompute(c.chain, budget, dp_options(slots));
      ASSERT_EQ(ops.has_value(), best.has_value());
      const auto fast = fast_recompute_value(c.chain, budget, dp_options(slots));
      const auto reference = reference_recompute_value(c.chain, budget, dp_options(slots));
      ASSERT_EQ(fast.has_value(), best.has_value());
      ASSERT_EQ(reference.has_value(), best.has_value());
      if (!best) { ++out.num_infeasible; continue; }
      ++out.num_feasible;
      const std::optional<Evaluated> best_twice = testing::fastest_fitting(twice, budget);
      if (!best_twice || best_twice->time_ms > best->time_ms) ++out.num_only_with_sharing;
      const std::optional<Evaluated> best_unpriced = testing::fastest_fitting(unpriced, budget);
      if (c.evaluated.at(best_unpriced->index).time_ms > best->time_ms) ++out.num_only_with_prices;
      const SimResult sim = simulate_sequential(c.chain, *ops);
      ASSERT_TRUE(sim.valid) << sim.error;
      EXPECT_LE(sim.peak_bytes, budget);
      EXPECT_EQ(sim.time_ms, best->time_ms);
      EXPECT_EQ(static_cast<double>(*fast) * unit_ms, best->time_ms);
      EXPECT_EQ(*reference, *fast);
      EXPECT_EQ(index_of(L).count(key_of(*ops)), 1u) << "the DP's schedule is not persistent";
    }
  }
}

TEST(DpVsBruteForce, SameOptimumWhenRoundingIsExact) {
  ExactComparison r;
  compare_with_brute_force(42, 2000, 0.0, r);
  // The budgets do cover both sides of feasibility.
  EXPECT_GT(r.num_feasible, 10000);
  EXPECT_GT(r.num_infeasible, 3000);
  EXPECT_EQ(r.num_only_with_sharing, 0);
}

// Note [Carried bytes] in solver/chain/chain.h: with stages that pass part of their input
// through, the brute force's simulator counts shared bytes once, and the DP must find
// the same optimum -- including the plans that only fit because of the sharing.
TEST(DpVsBruteForce, SameOptimumWithCarriedBytes) {
  ExactComparison r;
  compare_with_brute_force(1801, 1200, 0.7, r);
  EXPECT_GT(r.num_carrying, 600);
  EXPECT_GT(r.num_feasible, 5000);
  // Counting the shared bytes once matters: at these budgets counting them twice
  // would have lost the optimum.
  EXPECT_GT(r.num_only_with_sharing, 500);
}

// Note [A stage run back to back] in solver/chain/chain.h: with a time of its own for a
// stage's fwd_keep and bwd back to back, the DP finds the brute force's optimum, where
// the brute force prices each op by the simulator's context.
TEST(DpVsBruteForce, SameOptimumWithBackToBackTimes) {
  ExactComparison r;
  compare_with_brute_force(3907, 1500, 0.0, r, 0.0, 0.7);
  EXPECT_GT(r.num_pair_timed, 1000);
  EXPECT_GT(r.num_feasible, 5000);
  // The prices matter: at these budgets one price per op would pick a plan of
  // another time.
  EXPECT_GT(r.num_only_with_prices, 500);
}

// Note [A backward may peak below its gradient] in solver/chain/chain.h: with negative
// backward transients (and carried bytes), the DP still finds the brute force's optimum.
TEST(DpVsBruteForce, SameOptimumWhenABackwardPeaksBelowItsGradient) {
  ExactComparison r;
  compare_with_brute_force(2611, 1200, 0.4, r, 0.6);
  EXPECT_GT(r.num_below_gradient, 500);
  EXPECT_GT(r.num_carrying, 300);
  EXPECT_GT(r.num_feasible, 4000);
}

TEST(DpVsBruteForce, RoundingOnlyLosesWithArbitrarySizes) {
  std::mt19937_64 rng(7);
  int num_feasible = 0, num_missed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + trial % kMaxLength;
    const Chain chain = testing::random_byte_chain(rng, L, 1000);
    const auto evaluated = testing::evaluate_all(chain, schedules_of(L));
    int64_t lo = evaluated[0].peak_bytes, hi = lo;
    for (const Evaluated& e : evaluated) { lo = std::min(lo, e.peak_bytes); hi = std::max(hi, e.peak_bytes); }
    for (int k = 0; k < 20; ++k) {
      const int64_t budget = std::max<int64_t>(1, lo * 9 / 10 + static_cast<int64_t>(rng() % (hi * 13 / 10 - lo * 9 / 10 + 1)));
      const int slots = 10 + static_cast<int>(rng() % 300);
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" + std::to_string(slots));
      const auto ops = solve_recompute(chain, budget, dp_options(slots));
      const std::optional<Evaluated> best = testing::fastest_fitting(evaluated, budget);
      if (!ops) {
        if (best) ++num_missed;
        continue;
      }
      ++num_feasible;
      const SimResult sim = simulate_sequential(chain, *ops);
      ASSERT_TRUE(sim.valid) << sim.error;
      EXPECT_LE(sim.peak_bytes, budget);
      ASSERT_TRUE(best.has_value()) << "the DP found a schedule the brute force says does not fit";
      // The DP's schedule is one of the enumerated ones, so its time is one of the
      // numbers the brute force minimised over: >= holds exactly.
      const auto it = index_of(L).find(key_of(*ops));
      ASSERT_NE(it, index_of(L).end()) << "the DP's schedule is not persistent";
      EXPECT_EQ(evaluated[it->second].time_ms, sim.time_ms);
      EXPECT_GE(sim.time_ms, best->time_ms);
    }
  }
  EXPECT_GT(num_feasible, 1000);
  EXPECT_GT(num_missed, 0);  // coarse slots do lose schedules: the test sees both sides
}

TEST(DpVsBruteForce, OneByteSlotsAreExactForArbitrarySizes) {
  // slots = budget bytes makes the unit one byte: exact sizes again, but real times,
  // so the DP may misorder two schedules only by the quantisation of their times:
  // each op's time is rounded to the nearest quantum, at most unit_ms/2 per op.
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 150; ++trial) {
    const int L = 1 + trial % kMaxLength;
    const Chain chain = testing::random_byte_chain(rng, L, 60);
    const auto evaluated = testing::evaluate_all(chain, schedules_of(L));
    int64_t hi = 0;
    for (const Evaluated& e : evaluated) hi = std::max(hi, e.peak_bytes);
    const double unit_ms = time_quantum_for(chain).unit_ms;
    for (int64_t budget = 1; budget <= hi + 1; budget += 1 + static_cast<int64_t>(rng() % 4)) {
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget));
      const auto ops = solve_recompute(chain, budget, dp_options(static_cast<int>(budget)));
      const std::optional<Evaluated> best = testing::fastest_fitting(evaluated, budget);
      ASSERT_EQ(ops.has_value(), best.has_value());
      if (!best) continue;
      const SimResult sim = simulate_sequential(chain, *ops);
      ASSERT_TRUE(sim.valid) << sim.error;
      EXPECT_LE(sim.peak_bytes, budget);
      const double tolerance_ms =
          static_cast<double>(ops->size() + schedules_of(L)[best->index].size()) * unit_ms / 2;
      EXPECT_GE(sim.time_ms, best->time_ms);
      EXPECT_LE(sim.time_ms, best->time_ms + tolerance_ms);
    }
  }
}

// rotor's published recurrence checks x_{s+1} instead of x_{t+1} in the keep branch's
// forward. Where x_{s+1} < x_{t+1} and ftmp_s is large, that lets it keep a stage whose
// forward does not fit: show by search that this happens.
TEST(RotorCompat, CanReturnSchedulesOverTheBudget) {
  std::mt19937_64 rng(2024);
  int num_over = 0, num_checked = 0;
  for (int trial = 0; trial < 400 && num_over < 5; ++trial) {
    const int L = 2 + trial % (kMaxLength - 1);
    const ExactCase c = exact_case(rng, L, /*large_tmp_probability=*/0.5);
    for (int64_t n = 1; n <= c.max_peak_units; ++n) {
      const int64_t budget = n * c.unit_bytes;
      const auto compat = solve_recompute(c.chain, budget, dp_options(static_cast<int>(n), true));
      if (!compat) continue;
      ++num_checked;
      const SimResult sim = simulate_sequential(c.chain, *compat);
      ASSERT_TRUE(sim.valid) << sim.error;
      if (sim.peak_bytes <= budget) continue;
      ++num_over;
      // The exact DP's schedule at the same budget fits (or there is none).
      if (const auto exact = solve_recompute(c.chain, budget, dp_options(static_cast<int>(n)))) {
        EXPECT_LE(simulate_sequential(c.chain, *exact).peak_bytes, budget);
      }
    }
  }
  EXPECT_GT(num_checked, 0);
  EXPECT_GT(num_over, 0) << "no chain found on which rotor's recurrence exceeds the budget";
}

TEST(RotorCompat, ExceedsTheBudgetOnAFourStageChain) {
  // Found by the search above. Budget 19 in 19 one-byte slots. After the first forward
  // (checkpoints a_0, a_1; d_3 resident after bwd 3) rotor keeps stage 1 in subchain
  // (1, 2): its check is x_2 + x̄_2 + ftmp_1 = 2 + 3 + 12 = 17 <= m = 19 - a_0 - a_1,
  // but the forward really holds d_3 (x_3 = 3), not d_2: 1 + 1 + 3 + 3 + 12 = 20 bytes.
  // The exact check (x_3 + 3 + 12 = 18 > 17) recomputes stage 1 instead: peak 19.
  Chain chain;
  chain.input_bytes = 1;
  chain.stages.push_back({"s0", 1.0, 1.0, 1, 5, 0, 0});
  chain.stages.push_back({"s1", 1.0, 1.0, 2, 3, 12, 4});
  chain.stages.push_back({"s2", 1.0, 1.0, 3, 5, 3, 1});
  chain.stages.push_back({"s3", 1.0, 1.0, 3, 8, 0, 0});
  const auto compat = solve_recompute(chain, 19, dp_options(19, true));
  ASSERT_TRUE(compat.has_value());
  const SimResult over = simulate_sequential(chain, *compat);
  ASSERT_TRUE(over.valid) << over.error;
  EXPECT_EQ(over.peak_bytes, 20);
  EXPECT_EQ(over.time_ms, 11);
  const auto exact = solve_recompute(chain, 19, dp_options(19));
  ASSERT_TRUE(exact.has_value());
  const SimResult fits_it = simulate_sequential(chain, *exact);
  EXPECT_EQ(fits_it.peak_bytes, 19);
  EXPECT_EQ(fits_it.time_ms, 12);
}

TEST(RotorCompat, IsNotUniformlyLooserThanTheExactCheck) {
  // One stage with a large forward tmp: x_0 = 1, x_1 = x̄_1 = 10, ftmp_0 = 100. Storing
  // everything peaks at 1 + 10 + 100 = 111 (fwd_keep 0); the exact keep check asks
  // m = 110 >= x_2 + x̄_1 + ftmp_0 = 0 + 10 + 100, rotor's asks 10 + 10 + 100 = 120,
  // and the only other schedule recomputes stage 0 with d_1 resident (peak 121).
  Chain chain;
  chain.input_bytes = 1;
  chain.stages.push_back({"s0", 1.0, 2.0, 10, 10, 100, 0});
  const int64_t budget = 111;
  const auto exact = solve_recompute(chain, budget, dp_options(111));
  ASSERT_TRUE(exact.has_value());
  const SimResult sim = simulate_sequential(chain, *exact);
  EXPECT_TRUE(fits(sim, budget));
  EXPECT_EQ(sim.peak_bytes, 111);
  EXPECT_FALSE(solve_recompute(chain, budget, dp_options(111, true)).has_value());
  EXPECT_TRUE(solve_recompute(chain, 121, dp_options(121, true)).has_value());
}

TEST(RotorCompat, LooserWhenForwardTmpNeverBindsAndEqualWhenItsScheduleFits) {
  // When the keep branch's forward tmp (ftmp_keep_s) <= x_s + btmp_s for every stage,
  // rotor's forward term is dominated by
  // the backward term of the same check, so its keep check is never stricter than the
  // exact one: its value can only be lower. When its schedule also fits, that schedule
  // is a persistent schedule within the budget, so the exact optimum is no slower:
  // the two values are equal.
  std::mt19937_64 rng(5);
  int num_equal = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + trial % kMaxLength;
    ExactCase c = exact_case(rng, L, 0.3);
    for (int i = 0; i < L; ++i) {
      Stage& s = c.chain.stages[i];
      s.fwd_tmp_bytes = std::min(s.fwd_tmp_bytes, c.chain.x(i) + s.bwd_tmp_bytes);
      if (s.fwd_keep_tmp_bytes) s.fwd_keep_tmp_bytes = std::min(*s.fwd_keep_tmp_bytes, c.chain.x(i) + s.bwd_tmp_bytes);
    }
    for (int64_t n = 1; n <= c.max_peak_units + 1; ++n) {
      const int64_t budget = n * c.unit_bytes;
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget));
      const auto exact = fast_recompute_value(c.chain, budget, dp_options(static_cast<int>(n)));
      const auto compat = fast_recompute_value(c.chain, budget, dp_options(static_cast<int>(n), true));
      if (exact) {
        ASSERT_TRUE(compat.has_value());
        EXPECT_LE(*compat, *exact);
      }
      if (!compat) continue;
      const auto ops = solve_recompute(c.chain, budget, dp_options(static_cast<int>(n), true));
      ASSERT_TRUE(ops.has_value());
      if (fits(simulate_sequential(c.chain, *ops), budget)) {
        ASSERT_TRUE(exact.has_value());
        EXPECT_EQ(*compat, *exact);
        ++num_equal;
      }
    }
  }
  EXPECT_GT(num_equal, 1000);
}

}  // namespace
}  // namespace memopt::solver

// dp_property_test.cpp: properties of the recompute DP (docs/formats.md, "The recompute DP") over thousands
// of random chains of up to 12 stages: within budget, monotone in the budget, never
// worse than a baseline that fits, never below Σ(uf+ub), bit-identical to the plain
// reference recurrence, and equal to store-all when everything fits.
//
// Note [Comparing in slots]
// The DP answers for the chain rounded to slots of budget/slots (sizes up) and to
// time quanta (times to nearest). A baseline "fits" for the DP only when its peak on
// that rounded chain is <= slots: a baseline that fits in bytes can miss in slots, and
// then the DP owes it nothing. On the rounded chain (testing::discretised) peaks are
// integers of slots and times integers of quanta, so the comparison is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "solver/dp/baselines.h"
#include "solver/chain/chain.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

DpOptions dp_options(int slots, bool rotor_compat = false, int num_threads = 1) {
  DpOptions o;
  o.slots = slots;
  o.rotor_compat = rotor_compat;
  o.num_threads = num_threads;
  return o;
}

// Random chains of 1..12 stages whose byte sizes span several magnitudes (up to GBs,
// so that slot rounding sees 128-bit products), with real times.
Chain property_chain(std::mt19937_64& rng, int trial, double zero_probability = 0.1) {
  static const int64_t units[] = {1, 1000, 1 << 20, 123'456'789};
  testing::RandomChainOptions o;
  o.length = 1 + trial % 12;
  o.unit_bytes = units[rng() % 4];
  o.max_units = 20;
  o.zero_probability = zero_probability;
  o.large_tmp_units = 60;
  o.integer_ms = trial % 3 == 0;
  o.max_ms = 50;
  return testing::random_chain(rng, o);
}

int64_t store_all_peak(const Chain& chain) {
  return simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
}

// A budget between 20% and 130% of the store-all peak, at least one byte.
int64_t random_budget(std::mt19937_64& rng, const Chain& chain) {
  const double f = 0.2 + 1.1 * std::uniform_real_distribution<double>(0, 1)(rng);
  return std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(store_all_peak(chain))));
}

int random_slots(std::mt19937_64& rng) { return 50 + static_cast<int>(rng() % 451); }

// Σ(uf+ub) + ub_L in quantum units: no schedule is faster.
int64_t lower_bound_units(const Chain& chain) {
  const TimeQuantum q = time_quantum_for(chain);
  int64_t sum = q.units(chain.loss.bwd_ms);
  for (int i = 0; i < chain.length(); ++i) sum += q.units(chain.uf(i)) + q.units(chain.ub(i));
  return sum;
}

TEST(DpProperties, WithinBudgetAndNeverBelowTheLowerBound) {
  std::mt19937_64 rng(11);
  int num_feasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Chain chain = property_chain(rng, trial);
    const int64_t budget = random_budget(rng, chain);
    const int slots = random_slots(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" + std::to_string(slots));
    const auto ops = solve_recompute(chain, budget, dp_options(slots));
    const auto value = fast_recompute_value(chain, budget, dp_options(slots));
    ASSERT_EQ(ops.has_value(), value.has_value());
    if (!ops) continue;
    ++num_feasible;
    const SimResult sim = simulate_sequential(chain, *ops);
    ASSERT_TRUE(sim.valid) << sim.error;
    EXPECT_LE(sim.peak_bytes, budget);
    // The simulated time sums a superset of Σ(uf+ub)'s terms in another order: allow
    // the rounding of that reordering (1e-12 relative; the sums have < 1000 terms).
    const double bound_ms = sum_fwd_bwd_ms(chain);
    EXPECT_GE(sim.time_ms, bound_ms - 1e-12 * bound_ms);
    EXPECT_GE(*value, lower_bound_units(chain));
    // The value is the rounded-chain time of the returned schedule, exactly.
    const SimResult rounded = simulate_sequential(testing::discretised(chain, budget, slots), *ops);
    EXPECT_EQ(static_cast<double>(*value), rounded.time_ms);
    EXPECT_LE(rounded.peak_bytes, slots);
  }
  EXPECT_GT(num_feasible, 1000);
}

TEST(DpProperties, MonotoneNonIncreasingInTheBudget) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 300; ++trial) {
    const Chain chain = property_chain(rng, trial);
    const int slots = random_slots(rng);
    const bool compat = trial % 2 == 1;
    const int64_t top = store_all_peak(chain);
    std::optional<int64_t> previous;
    bool was_feasible = false;
    // 40 budgets from 10% to 150% of the store-all peak, increasing.
    for (int k = 1; k <= 40; ++k) {
      const int64_t budget = std::max<int64_t>(1, top * (10 + 140 * k / 40) / 100);
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget));
      const auto value = fast_recompute_value(chain, budget, dp_options(slots, compat));
      if (was_feasible) {
        ASSERT_TRUE(value.has_value()) << "feasible at a smaller budget, infeasible here";
        EXPECT_LE(*value, *previous);
      }
      if (value) { was_feasible = true; previous = value; }
    }
  }
}

TEST(DpProperties, TableIsMonotoneInMemory) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    const Chain chain = property_chain(rng, trial, 0.3);
    const int64_t budget = random_budget(rng, chain);
    const int slots = random_slots(rng);
    const RecomputeTable table(chain, budget, dp_options(slots, trial % 2 == 1, 1));
    ASSERT_EQ(table.slots(), slots);
    const int L = chain.length();
    for (int s = 0; s <= L; ++s) {
      for (int t = s; t <= L; ++t) {
        const int64_t first = table.finite_from(s, t);
        EXPECT_GE(table.value(s, t, -1), RecomputeTable::kInfinity);
        for (int64_t m = 0; m <= slots; ++m) {
          const int64_t v = table.value(s, t, m);
          EXPECT_EQ(v < RecomputeTable::kInfinity, m >= first) << "(" << s << ", " << t << ", " << m << ")";
          if (m > 0 && v < RecomputeTable::kInfinity) {
            EXPECT_LE(v, table.value(s, t, m - 1));
          }
        }
      }
    }
    const auto value = fast_recompute_value(chain, budget, dp_options(slots, trial % 2 == 1));
    const int64_t top = table.value(0, L, slots - table.x_slots(0));
    EXPECT_EQ(value.has_value(), top < RecomputeTable::kInfinity);
    if (value) {
      EXPECT_EQ(*value, top);
    }
  }
}

// Note [A table past its budget] in rotor.h: extra slots change no value at m <= slots,
// and at m = slots + e they equal the table of e more slots of the same size (a budget
// of (slots + e) * budget / slots bytes, chosen divisible so that the sizes are equal).
TEST(DpProperties, ATablePastItsBudgetKeepsEveryValue) {
  std::mt19937_64 rng(19);
  int num_compared_past = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Chain chain = property_chain(rng, trial, trial % 3 == 0 ? 0.4 : 0.1);
    const int slots = random_slots(rng);
    const int64_t budget = std::max<int64_t>(1, random_budget(rng, chain) / slots) * slots;  // divisible by slots
    const int extra = 1 + static_cast<int>(rng() % 60);
    const bool compat = trial % 2 == 1;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" +
                 std::to_string(slots) + ", extra=" + std::to_string(extra));
    const RecomputeTable plain(chain, budget, dp_options(slots, compat));
    const RecomputeTable past(chain, budget, dp_options(slots, compat), extra);
    const RecomputeTable wider(chain, budget / slots * (slots + extra), dp_options(slots + extra, compat));
    ASSERT_EQ(past.slots(), slots + extra);
    const int L = chain.length();
    for (int s = 0; s <= L; ++s) {
      for (int t = s; t <= L; ++t) {
        for (int64_t m = 0; m <= slots + extra; ++m) {
          ASSERT_EQ(past.value(s, t, m), wider.value(s, t, m)) << "(" << s << ", " << t << ", " << m << ")";
          if (m <= slots) {
            ASSERT_EQ(past.value(s, t, m), plain.value(s, t, m)) << "(" << s << ", " << t << ", " << m << ")";
          } else {
            num_compared_past += past.value(s, t, m) < RecomputeTable::kInfinity;
          }
        }
      }
    }
    // The plan at the budget's root is the plain table's.
    const int64_t root = slots - plain.x_slots(0);
    if (root >= 0 && plain.value(0, L, root) < RecomputeTable::kInfinity) {
      std::vector<Op> a, b;
      plain.emit(0, L, root, a);
      past.emit(0, L, root, b);
      ASSERT_EQ(a, b);
    }
  }
  EXPECT_GT(num_compared_past, 10000);
}

struct Baseline {
  const char* name;
  std::function<std::vector<Op>(const Chain&)> ops;
};

TEST(DpProperties, NeverWorseThanABaselineThatFitsInSlots) {
  const Baseline baselines[] = {
      {"store_all", store_all_ops},
      {"sqrt", sqrt_ops},
      {"recompute_blocks", recompute_blocks_ops},
      {"recompute_all", recompute_all_ops},
  };
  std::mt19937_64 rng(14);
  int num_compared[4] = {0, 0, 0, 0};
  for (int trial = 0; trial < 2000; ++trial) {
    const Chain chain = property_chain(rng, trial);
    const int64_t budget = random_budget(rng, chain);
    const int slots = random_slots(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" + std::to_string(slots));
    const Chain rounded = testing::discretised(chain, budget, slots);
    const auto ops = solve_recompute(chain, budget, dp_options(slots));
    const auto value = fast_recompute_value(chain, budget, dp_options(slots));
    const double unit_ms = time_quantum_for(chain).unit_ms;
    for (int b = 0; b < 4; ++b) {
      const std::vector<Op> baseline_ops = baselines[b].ops(chain);
      const SimResult in_slots = simulate_sequential(rounded, baseline_ops);
      ASSERT_TRUE(in_slots.valid) << baselines[b].name << ": " << in_slots.error;
      if (in_slots.peak_bytes > slots) continue;  // Note [Comparing in slots]
      ++num_compared[b];
      ASSERT_TRUE(value.has_value()) << baselines[b].name << " fits in slots but the DP finds nothing";
      ASSERT_TRUE(ops.has_value());
      EXPECT_LE(static_cast<double>(*value), in_slots.time_ms) << baselines[b].name;
      // In ms: the quantisation of each op's time (<= unit_ms/2) may misorder the two.
      const SimResult dp = simulate_sequential(chain, *ops);
      const SimResult bl = simulate_sequential(chain, baseline_ops);
      const double tolerance_ms = static_cast<double>(ops->size() + baseline_ops.size()) * unit_ms / 2;
      EXPECT_LE(dp.time_ms, bl.time_ms + tolerance_ms) << baselines[b].name;
      // What fits in slots fits in bytes.
      EXPECT_LE(bl.peak_bytes, budget) << baselines[b].name;
    }
  }
  for (int b = 0; b < 4; ++b) EXPECT_GT(num_compared[b], 200) << baselines[b].name;
}

TEST(DpProperties, FastEqualsReferenceBitForBit) {
  std::mt19937_64 rng(15);
  int num_feasible = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    // Every third chain has many zero-size tensors (a zero size makes a subchain read
    // a cell of the same diagonal: the fill order matters).
    const Chain chain = property_chain(rng, trial, trial % 3 == 0 ? 0.4 : 0.1);
    const int64_t budget = random_budget(rng, chain);
    const int slots = random_slots(rng);
    const bool compat = trial % 2 == 1;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" +
                 std::to_string(slots) + ", compat=" + std::to_string(compat));
    const auto fast = fast_recompute_value(chain, budget, dp_options(slots, compat));
    const auto reference = reference_recompute_value(chain, budget, dp_options(slots, compat));
    ASSERT_EQ(fast, reference);
    if (fast) ++num_feasible;
  }
  EXPECT_GT(num_feasible, 1500);
}

// Every cell of the fast table, not only the answer: Note [Branches that cannot lower
// the row] in rotor.cpp skips parts of branches, which must leave each value as the
// whole recurrence gives it. Longer chains too, where most branches are cut short.
TEST(DpProperties, EveryCellEqualsTheReference) {
  std::mt19937_64 rng(19);
  int64_t finite_cells = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Chain chain = property_chain(rng, trial, trial % 3 == 0 ? 0.4 : 0.1);
    if (trial % 4 == 3) {
      testing::RandomChainOptions o;
      o.length = 20 + static_cast<int>(rng() % 21);
      o.max_ms = 50;
      chain = testing::random_chain(rng, o);
    }
    const int64_t budget = random_budget(rng, chain);
    const int slots = 50 + static_cast<int>(rng() % 151);
    const bool compat = trial % 2 == 1;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", L=" + std::to_string(chain.length()) + ", budget=" +
                 std::to_string(budget) + ", slots=" + std::to_string(slots) + ", compat=" + std::to_string(compat));
    const std::vector<int64_t> reference = reference_recompute_cells(chain, budget, dp_options(slots, compat));
    const RecomputeTable table(chain, budget, dp_options(slots, compat, trial % 5 == 0 ? 2 : 1));
    const int L = chain.length();
    size_t cell = 0;
    for (int s = 0; s <= L; ++s) {
      for (int t = s; t <= L; ++t) {
        for (int64_t m = 0; m <= slots; ++m, ++cell) {
          ASSERT_LT(cell, reference.size());
          ASSERT_EQ(table.value(s, t, m), reference[cell]) << "(" << s << ", " << t << ", " << m << ")";
          if (reference[cell] < RecomputeTable::kInfinity) ++finite_cells;
        }
      }
    }
    ASSERT_EQ(cell, reference.size());
  }
  EXPECT_GT(finite_cells, 1'000'000);
}

TEST(DpProperties, ThreadedFillEqualsReferenceAndItsSchedule) {
  // The column wavefront over threads (2, and 0 = all cores) must not change a value
  // or the reconstructed schedule. Fewer trials than above: ctest runs test processes
  // side by side, and a threaded fill on busy cores spends most of its time waiting.
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 300; ++trial) {
    const Chain chain = property_chain(rng, trial, trial % 3 == 0 ? 0.4 : 0.1);
    const int64_t budget = random_budget(rng, chain);
    const int slots = random_slots(rng);
    const bool compat = trial % 2 == 1;
    const int threads = trial % 4 < 2 ? 2 : 0;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", budget=" + std::to_string(budget) + ", slots=" +
                 std::to_string(slots) + ", compat=" + std::to_string(compat) + ", threads=" + std::to_string(threads));
    const auto fast = fast_recompute_value(chain, budget, dp_options(slots, compat, threads));
    ASSERT_EQ(fast, reference_recompute_value(chain, budget, dp_options(slots, compat)));
    const auto ops = solve_recompute(chain, budget, dp_options(slots, compat, threads));
    ASSERT_EQ(ops, solve_recompute(chain, budget, dp_options(slots, compat, 1)));
  }
}

TEST(DpProperties, SlotRoundingIsCeiling) {
  std::mt19937_64 rng(16);
  for (int k = 0; k < 20000; ++k) {
    const int64_t budget = 1 + static_cast<int64_t>(rng() % (int64_t{1} << (k % 40 + 1)));
    const int64_t bytes = static_cast<int64_t>(rng() % (int64_t{1} << (k % 41 + 1)));
    const int slots = 1 + static_cast<int>(rng() % 5000);
    const int64_t got = bytes_to_slots(bytes, budget, slots);
    ASSERT_EQ(got, testing::ceil_slots(bytes, budget, slots)) << bytes << " B of " << budget << " B / " << slots;
    // Smallest integer with got * budget >= bytes * slots.
    ASSERT_GE(static_cast<__int128>(got) * budget, static_cast<__int128>(bytes) * slots);
    if (got > 0) {
      ASSERT_LT(static_cast<__int128>(got - 1) * budget, static_cast<__int128>(bytes) * slots);
    }
  }
}

TEST(DpProperties, HomogeneousChainsStoreAllWhenItFits) {
  // Dyadic times make every schedule's time an exact double.
  const double uf = 1.5, ub = 3.25;
  std::mt19937_64 rng(17);
  for (int L = 1; L <= 24; ++L) {
    for (int variant = 0; variant < 6; ++variant) {
      SCOPED_TRACE("L=" + std::to_string(L) + ", variant " + std::to_string(variant));
      const int64_t a = 1 + static_cast<int64_t>(rng() % 6), b = a + static_cast<int64_t>(rng() % 12);
      const double store_all_ms = L * (uf + ub);
      // (1) Sizes in whole units of budget/slots, budget exactly the store-all peak.
      {
        const int64_t unit = 1 + static_cast<int64_t>(rng() % 100000);
        const Chain chain = testing::homogeneous_chain(L, uf, ub, a * unit, b * unit);
        const int64_t peak_units = L * b + 3 * a;
        const auto ops = solve_recompute(chain, peak_units * unit, dp_options(static_cast<int>(peak_units)));
        ASSERT_TRUE(ops.has_value());
        const SimResult sim = simulate_sequential(chain, *ops);
        ASSERT_TRUE(sim.valid) << sim.error;
        EXPECT_EQ(sim.time_ms, store_all_ms);
        EXPECT_LE(sim.peak_bytes, peak_units * unit);
        // One byte less and store-all no longer fits: something slower is needed.
        if (const auto less = solve_recompute(chain, peak_units * unit - 1, dp_options(static_cast<int>(peak_units)))) {
          EXPECT_GT(simulate_sequential(chain, *less).time_ms, store_all_ms);
        }
      }
      // (2) Arbitrary sizes, 50..500 slots: the smallest budget >= the store-all peak
      // (in 0.5% steps) at which store-all fits in slots (Note [Comparing in slots]).
      {
        const Chain chain = testing::homogeneous_chain(L, uf, ub, a * 1000 + static_cast<int64_t>(rng() % 1000),
                                                       b * 1000 + 999);
        const int slots = random_slots(rng);
        const int64_t peak = store_all_peak(chain);
        int64_t budget = peak;
        while (simulate_sequential(testing::discretised(chain, budget, slots), store_all_ops(chain)).peak_bytes > slots)
          budget += std::max<int64_t>(1, peak / 200);
        for (const int64_t more : {int64_t{0}, peak / 3, 5 * peak}) {
          const auto ops = solve_recompute(chain, budget + more, dp_options(slots));
          ASSERT_TRUE(ops.has_value());
          const SimResult sim = simulate_sequential(chain, *ops);
          EXPECT_EQ(sim.time_ms, store_all_ms);
          EXPECT_LE(sim.peak_bytes, budget + more);
        }
      }
    }
  }
}

}  // namespace
}  // namespace memopt::solver

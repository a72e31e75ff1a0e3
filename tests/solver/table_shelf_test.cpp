// table_shelf_test.cpp: Note [Tables shared between solves] (solver/search/table_shelf.h)
// -- each table filled once, whatever the threads asking for it, one per key, equal
// cell for cell to a table filled on its own; and the solves that share a shelf make
// the very plans they make without one.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "solver/chain/simulate.h"
#include "solver/dp/baselines.h"
#include "solver/search/optimal.h"
#include "solver/search/solve.h"
#include "solver/search/table_shelf.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

Chain a_chain(uint64_t seed, int length, bool with_link) {
  std::mt19937_64 rng(seed);
  testing::RandomChainOptions o;
  o.length = length;
  o.unit_bytes = 1000;
  o.max_units = 30;
  o.integer_ms = false;
  o.max_ms = 20;
  Chain chain = testing::random_chain(rng, o);
  if (with_link) chain.link = Link{3e6, 2e6};
  return chain;
}

TEST(RecomputeTableShelf, FillsEachTableOnceAndKeepsOnePerKey) {
  const Chain chain = a_chain(5, 12, false);
  const int64_t budget = store_all_peak_bytes(chain) / 2;
  DpOptions dp;
  dp.slots = 60;
  RecomputeTableShelf shelf;
  // Eight threads ask at once: one table comes back to all of them.
  std::vector<std::shared_ptr<const RecomputeTable>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = shelf.get(chain, budget, dp, 7); });
  for (std::thread& t : threads) t.join();
  for (const auto& table : got) EXPECT_EQ(table.get(), got[0].get());
  // Every other key is a table of its own.
  DpOptions rotor = dp;
  rotor.rotor_compat = true;
  DpOptions finer = dp;
  finer.slots = 61;
  EXPECT_NE(shelf.get(chain, budget, dp, 0).get(), got[0].get());
  EXPECT_NE(shelf.get(chain, budget + 1, dp, 7).get(), got[0].get());
  EXPECT_NE(shelf.get(chain, budget, rotor, 7).get(), got[0].get());
  EXPECT_NE(shelf.get(chain, budget, finer, 7).get(), got[0].get());
  EXPECT_EQ(shelf.size(), 5u);
  // The threads of the fill and the DP's other options are not part of the key.
  DpOptions other = dp;
  other.num_threads = 3;
  other.offload_shapes = OffloadShapes::Windowed;
  EXPECT_EQ(shelf.get(chain, budget, other, 7).get(), got[0].get());
  // Cleared, it holds none; a table handed out lives on, and asked again, it fills anew.
  const RecomputeTable* first = got[0].get();
  shelf.clear();
  EXPECT_EQ(shelf.size(), 0u);
  EXPECT_EQ(got[0]->slots(), dp.slots + 7);
  const auto again = shelf.get(chain, budget, dp, 7);
  EXPECT_NE(again.get(), first);
  EXPECT_EQ(shelf.size(), 1u);
  // Cell for cell the table a solve would fill on its own.
  const RecomputeTable own(chain, budget, dp, 7);
  ASSERT_EQ(got[0]->slots(), own.slots());
  for (int s = 0; s <= chain.length(); ++s)
    for (int t = s; t <= chain.length(); ++t)
      for (int64_t m = 0; m <= own.slots(); ++m) ASSERT_EQ(got[0]->value(s, t, m), own.value(s, t, m));
}

TEST(RecomputeTableShelf, RefusesASecondChain) {
  const Chain chain = a_chain(5, 6, false);
  const Chain other = a_chain(6, 6, false);
  RecomputeTableShelf shelf;
  DpOptions dp;
  dp.slots = 40;
  shelf.get(chain, store_all_peak_bytes(chain), dp);
  EXPECT_THROW(shelf.get(other, store_all_peak_bytes(other), dp), std::logic_error);
}

// `optimal` and `recompute-only` at one budget, in either order, through one shelf:
// the plans of each alone, and one table on the shelf, the one the first left and the
// second read (the starts' tables of `optimal` go on a shelf of its own).
TEST(RecomputeTableShelf, SolvesThatShareItMakeTheirOwnPlans) {
  int compared = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const Chain chain = a_chain(seed, 4 + static_cast<int>(seed % 7), seed % 2 == 0);
    for (const int tenths : {3, 6}) {
      const int64_t budget = std::max<int64_t>(1, store_all_peak_bytes(chain) * tenths / 10);
      DpOptions dp;
      dp.slots = 80;
      dp.num_threads = 1;
      const auto optimal_alone = plan_optimal(chain, budget, dp);
      const auto recompute_alone = plan_recompute_only(chain, budget, dp);
      for (const bool optimal_first : {true, false}) {
        RecomputeTableShelf shelf;
        std::optional<std::vector<Op>> optimal, recompute;
        if (optimal_first) optimal = plan_optimal(chain, budget, dp, {}, {}, &shelf);
        recompute = plan_recompute_only(chain, budget, dp, {}, &shelf);
        if (!optimal_first) optimal = plan_optimal(chain, budget, dp, {}, {}, &shelf);
        SCOPED_TRACE(testing::numbered("seed ", static_cast<int>(seed)) + ", tenths " + std::to_string(tenths));
        EXPECT_EQ(optimal, optimal_alone);
        EXPECT_EQ(recompute, recompute_alone);
        EXPECT_EQ(shelf.size(), 1u);
        compared += optimal.has_value();
      }
    }
  }
  EXPECT_GE(compared, 20);  // not vacuous: many budgets have plans
}

// Through the front door: solve() with a shelf in its options, as `memopt solve`'s
// table of every solver and the trade-off sweep call it, and without one.
TEST(RecomputeTableShelf, SolveGivesTheSameScheduleWithAndWithoutOne) {
  for (uint64_t seed = 30; seed < 40; ++seed) {
    const Chain chain = a_chain(seed, 8, true);
    SolveOptions alone;
    alone.budget_bytes = store_all_peak_bytes(chain) * 4 / 10;
    alone.slots = 80;
    alone.find_min_budget = false;
    SolveOptions shared = alone;
    shared.tables = std::make_shared<RecomputeTableShelf>();
    for (const SolverKind kind : {SolverKind::RecomputeOnly, SolverKind::Optimal}) {
      alone.solver = shared.solver = kind;
      std::optional<Schedule> a, b;
      try {
        a = solve(chain, alone);
      } catch (const InfeasibleBudget&) {
      }
      try {
        b = solve(chain, shared);
      } catch (const InfeasibleBudget&) {
      }
      ASSERT_EQ(a.has_value(), b.has_value()) << "seed " << seed;
      if (a) {
        EXPECT_EQ(a->ops, b->ops) << "seed " << seed;
      }
    }
  }
}

}  // namespace
}  // namespace memopt::solver

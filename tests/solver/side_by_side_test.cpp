// side_by_side_test.cpp: Note [Searches side by side] (solver/search/side_by_side.h) --
// every task runs once whatever the threads, the first error comes back, and
// `optimal` returns the same plan op for op on one thread and on several.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "solver/chain/simulate.h"
#include "solver/dp/baselines.h"
#include "solver/search/side_by_side.h"
#include "solver/search/solve.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

TEST(SideBySide, RunsEveryTaskOnceWhateverTheThreads) {
  for (const int threads : {0, 1, 2, 3, 8}) {
    for (const int count : {0, 1, 2, 5, 17}) {
      std::vector<std::atomic<int>> runs(count);
      std::vector<std::function<void()>> tasks;
      for (int i = 0; i < count; ++i) tasks.push_back([&runs, i] { ++runs[i]; });
      run_side_by_side(tasks, threads);
      for (int i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << "task " << i << ", threads " << threads;
    }
  }
}

TEST(SideBySide, GivesBackAnErrorAfterEveryTaskHasEnded) {
  for (const int threads : {1, 2, 4}) {
    std::atomic<int> ended{0};
    std::vector<std::function<void()>> tasks;
    for (int i = 0; i < 6; ++i)
      tasks.push_back([&ended, i] {
        ++ended;
        if (i == 3) throw std::runtime_error("task 3");
      });
    EXPECT_THROW(run_side_by_side(tasks, threads), std::runtime_error) << "threads " << threads;
    EXPECT_EQ(ended.load(), 6) << "threads " << threads;
  }
}

TEST(SideBySide, ThreadsPerPieceShareTheThreadsOut) {
  EXPECT_EQ(threads_per_piece(8, 3), 2);
  EXPECT_EQ(threads_per_piece(2, 3), 1);
  EXPECT_EQ(threads_per_piece(1, 1), 1);
  EXPECT_GE(threads_per_piece(0, 1), 1);
}

// The classes' searches and the kicks run side by side on several threads and one
// after another on one: the plan must be the same op for op. Block boundaries are
// named on some chains so that the plans of the blocks run too.
TEST(SideBySide, OptimalMakesTheSamePlanOnOneThreadAndOnSeveral) {
  std::mt19937_64 rng(71);
  int num_moving = 0;
  for (int trial = 0; trial < 60; ++trial) {
    testing::RandomChainOptions o;
    o.length = 3 + trial % 8;
    o.unit_bytes = 1 + static_cast<int64_t>(rng() % 1000);
    o.max_units = 30;
    o.integer_ms = false;
    o.max_ms = 20;
    o.carry_probability = trial % 3 == 0 ? 0.5 : 0.0;
    Chain chain = testing::random_chain(rng, o);
    const double bytes_per_s = static_cast<double>(o.unit_bytes) * 30 * 1000 / (trial % 2 ? 10 : 40);
    chain.link = Link{bytes_per_s, bytes_per_s * 0.75};
    if (trial % 2 == 0)
      for (int k = 0; k < chain.length(); ++k) chain.stages[k].block = "b" + std::to_string(k / 2);
    const int64_t store_all = store_all_peak_bytes(chain);
    for (const int tenths : {3, 5, 8}) {
      SolveOptions one;
      one.budget_bytes = std::max<int64_t>(1, store_all * tenths / 10);
      one.solver = SolverKind::Optimal;
      one.num_threads = 1;
      one.find_min_budget = false;
      SolveOptions several = one;
      several.num_threads = 4;
      SCOPED_TRACE("trial " + std::to_string(trial) + ", " + std::to_string(tenths) + "0% of store-all");
      Schedule a, b;
      try {
        a = solve(chain, one);
      } catch (const InfeasibleBudget&) {
        EXPECT_THROW(solve(chain, several), InfeasibleBudget);
        continue;
      }
      b = solve(chain, several);
      EXPECT_EQ(a.ops, b.ops);
      num_moving += std::any_of(a.ops.begin(), a.ops.end(), [](const Op& op) { return is_copy(op.kind); });
    }
  }
  EXPECT_GT(num_moving, 20);  // not vacuous: most plans move data, so the searches ran
}

}  // namespace
}  // namespace memopt::solver

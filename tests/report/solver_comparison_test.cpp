// solver_comparison_test.cpp: one solve's outcome is exactly what solve() answers --
// its schedule, or the exception it throws, named -- and the comparison lists every
// solver once, in the table's order.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "report/solver_comparison.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "tests/report/synthetic_profile.h"

namespace memopt::report {
namespace {

using solver::SolverKind;

// What solve() itself answers, in the comparison's words.
Outcome direct_outcome(const solver::Chain& chain, const solver::SolveOptions& o) {
  try {
    solver::solve(chain, o);
    return Outcome::Fits;
  } catch (const solver::InfeasibleBudget&) {
    return Outcome::Infeasible;
  } catch (const std::invalid_argument&) {
    return o.solver == SolverKind::OffloadAll ? Outcome::NeedsLink : Outcome::NeedsRoles;
  } catch (const std::runtime_error&) {
    return Outcome::OverBudget;
  }
}

TEST(SolverComparison, EveryOutcomeIsWhatSolveAnswers) {
  solver::Chain chain = synthetic_profile().chain;
  const int64_t peak = solver::store_all_peak_bytes(chain);
  int num_fits = 0, num_infeasible = 0;
  for (const bool with_link : {true, false}) {
    if (!with_link) chain.link.reset();
    for (const double fraction : {0.05, 0.3, 0.5, 0.8, 1.0}) {
      const solver::SolveOptions options{static_cast<int64_t>(fraction * static_cast<double>(peak)),
                                         SolverKind::Optimal, 200, 1};
      const std::vector<SolverRow> rows = compare_solvers(chain, options);
      ASSERT_EQ(rows.size(), std::size(solver::kSolverKinds));
      for (size_t i = 0; i < rows.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << solver::kSolverKinds[i].word << " at " << fraction);
        EXPECT_EQ(rows[i].kind, solver::kSolverKinds[i].kind);
        solver::SolveOptions o = options;
        o.solver = rows[i].kind;
        o.find_min_budget = false;
        const SolveAttempt& a = rows[i].attempt;
        EXPECT_EQ(a.outcome, direct_outcome(chain, o));
        EXPECT_EQ(a.schedule.has_value(), a.outcome == Outcome::Fits);
        EXPECT_EQ(a.error.empty(), a.outcome == Outcome::Fits);
        if (a.schedule) {
          const solver::Schedule s = solver::solve(chain, o);
          EXPECT_EQ(a.schedule->ops.size(), s.ops.size());
          EXPECT_EQ(a.schedule->predicted.peak_bytes, s.predicted.peak_bytes);
          EXPECT_LE(a.schedule->predicted.peak_bytes, o.budget_bytes);
          ++num_fits;
        }
        num_infeasible += a.outcome == Outcome::Infeasible;
      }
    }
  }
  EXPECT_GT(num_fits, 0);
  EXPECT_GT(num_infeasible, 0);
}

TEST(SolverComparison, OffloadingWithoutALinkNeedsOne) {
  solver::Chain chain = synthetic_profile().chain;
  chain.link.reset();
  const SolveAttempt a = attempt_solve(chain, {solver::store_all_peak_bytes(chain), SolverKind::OffloadAll, 200, 1});
  EXPECT_EQ(a.outcome, Outcome::NeedsLink);
  EXPECT_NE(a.error.find("bandwidth"), std::string::npos) << a.error;
  EXPECT_STREQ(outcome_word(a.outcome), "needs-link");
}

TEST(SolverComparison, ProblemTooLargeIsAnErrorNotAnOutcome) {
  const solver::Chain chain = synthetic_profile().chain;
  EXPECT_THROW(attempt_solve(chain, {solver::store_all_peak_bytes(chain), SolverKind::Optimal, 2000000000, 1}),
               solver::ProblemTooLarge);
}

}  // namespace
}  // namespace memopt::report

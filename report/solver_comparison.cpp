// solver_comparison.cpp: one solve and its outcome; every solver at one budget.
#include "report/solver_comparison.h"

#include <functional>
#include <stdexcept>
#include <vector>

#include "solver/search/side_by_side.h"

namespace memopt::report {

using namespace memopt::solver;

const char* outcome_word(Outcome outcome) {
  for (const auto& row : kOutcomes)
    if (row.value == outcome) return row.word;
  return "?";
}

SolveAttempt attempt_solve(const Chain& chain, const SolveOptions& options) {
  SolveAttempt a;
  if (std::string why = solver_needs(options.solver, chain); !why.empty()) {
    a.outcome = options.solver == SolverKind::OffloadAll ? Outcome::NeedsLink : Outcome::NeedsRoles;
    a.error = why;
    return a;
  }
  try {
    a.schedule = solve(chain, options);
    a.outcome = Outcome::Fits;
  } catch (const InfeasibleBudget& e) {
    a.outcome = Outcome::Infeasible;
    a.error = e.what();
  } catch (const ProblemTooLarge&) {
    throw;
  } catch (const std::logic_error&) {
    throw;  // a bug, never an answer
  } catch (const std::runtime_error& e) {
    a.outcome = Outcome::OverBudget;  // rotor-compat's published recurrence
    a.error = e.what();
  }
  return a;
}

// The solvers are independent of one another, so their rows are solved side by side
// (Note [Searches side by side] in solver/search/side_by_side.h), each with its share
// of the threads; the rows keep kSolverKinds' order.
std::vector<SolverRow> compare_solvers(const Chain& chain, const SolveOptions& options, const SolveAttempt* chosen) {
  std::vector<SolverRow> rows;
  std::vector<size_t> to_solve;
  for (const auto& k : kSolverKinds) {
    rows.push_back({k.kind, {}});
    if (chosen && k.kind == options.solver) rows.back().attempt = *chosen;
    else to_solve.push_back(rows.size() - 1);
  }
  const int inner_threads = threads_per_piece(options.num_threads, static_cast<int>(to_solve.size()));
  std::vector<std::function<void()>> tasks;
  for (const size_t i : to_solve)
    tasks.push_back([&, i] {
      SolveOptions o = options;
      o.solver = rows[i].kind;
      o.find_min_budget = false;
      o.num_threads = inner_threads;
      rows[i].attempt = attempt_solve(chain, o);
    });
  run_side_by_side(tasks, options.num_threads);
  return rows;
}

}  // namespace memopt::report

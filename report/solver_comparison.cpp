// solver_comparison.cpp: one solve and its outcome; every solver at one budget.
#include "report/solver_comparison.h"

#include <span>
#include <stdexcept>

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

std::vector<SolverRow> compare_solvers(const Chain& chain, const SolveOptions& options, const SolveAttempt* chosen) {
  std::vector<SolverRow> rows;
  // Note [Tables shared between solves] in solver/search/table_shelf.h: `optimal` and
  // `recompute-only` read one table at the budget.
  SolveOptions shared = options;
  if (!shared.tables) shared.tables = std::make_shared<RecomputeTableShelf>();
  const auto solved_here = [&](SolverKind kind) { return !(chosen && kind == options.solver); };
  std::vector<SolverKind> to_solve;
  for (const auto& k : kSolverKinds)
    if (solved_here(k.kind)) to_solve.push_back(k.kind);
  size_t solved = 0;
  for (const auto& k : kSolverKinds) {
    if (!solved_here(k.kind)) {
      rows.push_back({k.kind, *chosen});
      continue;
    }
    drop_unread_tables(*shared.tables, std::span<const SolverKind>(to_solve).subspan(solved++));
    SolveOptions o = shared;
    o.solver = k.kind;
    o.find_min_budget = false;
    rows.push_back({k.kind, attempt_solve(chain, o)});
  }
  return rows;
}

}  // namespace memopt::report

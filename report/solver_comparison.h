// solver_comparison.h: what one solver does at one budget -- its plan, or why it has
// none -- and every solver side by side at a budget: the comparison table of
// `memopt solve` and each point of the trade-off sweep.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"
#include "solver/search/solve.h"

namespace memopt::report {

enum class Outcome {
  Fits,        // a plan within the budget
  Infeasible,  // no plan of this solver fits the budget
  NeedsLink,   // the solver offloads and the chain has no link bandwidth
  OverBudget,  // the solver's plan exceeds the budget (rotor-compat's recurrence)
  NeedsRoles,  // selective or pointwise on a chain with no stage of their role
};
struct OutcomeInfo { Outcome value; const char* word; };  // the word is tradeoff.json's "status"
inline constexpr OutcomeInfo kOutcomes[] = {
    {Outcome::Fits, "ok"},
    {Outcome::Infeasible, "infeasible"},
    {Outcome::NeedsLink, "needs-link"},
    {Outcome::OverBudget, "over-budget"},
    {Outcome::NeedsRoles, "needs-roles"},
};
const char* outcome_word(Outcome outcome);

struct SolveAttempt {
  Outcome outcome = Outcome::Fits;
  std::optional<solver::Schedule> schedule;  // when it fits
  std::string error;                         // solve's message otherwise
};

// solver::solve with the outcomes that are answers, not errors, caught. A chain too
// large for the DP (solver::ProblemTooLarge) and bugs still throw.
SolveAttempt attempt_solve(const solver::Chain& chain, const solver::SolveOptions& options);

struct SolverRow {
  solver::SolverKind kind;
  SolveAttempt attempt;
};
// Every solver of solver::kSolverKinds, in that order, at options.budget_bytes (no
// search for the smallest budget that works). `chosen`, if given, is options.solver's
// attempt already made at that budget: its row, instead of solving again. The rows
// share options.tables, or a shelf of their own where it is null (Note [Tables shared
// between solves] in solver/search/table_shelf.h); give `chosen` the same shelf.
std::vector<SolverRow> compare_solvers(const solver::Chain& chain, const solver::SolveOptions& options,
                                       const SolveAttempt* chosen = nullptr);

}  // namespace memopt::report

// report_table.h: the tables the CLI prints (profile header, solver comparison,
// per-stage activity). Formatting only; the numbers come from the solver.
#pragma once

#include <string>
#include <vector>

#include "report/solver_comparison.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/search/solve.h"

namespace memopt::tools {

std::string solver_words(const std::string& separator = ", ");  // "optimal, recompute-only, ...", from kSolverKinds
void print_profile_header(const std::string& path, const solver::Profile& profile, int64_t store_all_peak_bytes);
// One row per solver at options.budget_bytes; the chosen one is starred, its row
// `chosen` (solved once, by the caller).
void print_solver_comparison(const solver::Chain& chain, const solver::SolveOptions& options,
                             const report::SolveAttempt& chosen);
// Consecutive stages with the same activity share a row.
void print_stage_activity(const solver::Chain& chain, const std::vector<solver::Op>& ops);

}  // namespace memopt::tools

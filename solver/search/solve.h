// solve.h: the front door of the solver -- pick a strategy by name, solve for a
// budget, simulate, and return a Schedule whose `predicted` is the simulator's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/limits.h"
#include "solver/search/search_options.h"
#include "solver/search/table_shelf.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

enum class SolverKind { Optimal, RecomputeOnly, RotorCompat, StoreAll, Sqrt, RecomputeBlocks, RecomputeAll, OffloadAll, Selective, Pointwise };

struct SolverKindInfo {
  SolverKind kind;
  std::string_view word;  // CLI --solver value and schedule.json "solver"
  std::string_view description;
};

inline constexpr SolverKindInfo kSolverKinds[] = {
    {SolverKind::Optimal, "optimal", "best of the keep/recompute/offload DP and every baseline"},
    {SolverKind::RecomputeOnly, "recompute-only", "best of the exact keep/recompute DP (docs/formats.md, \"The recompute DP\") and the non-offload baselines"},
    {SolverKind::RotorCompat, "rotor-compat", "rotor's published recurrence"},
    {SolverKind::StoreAll, "store-all", "keep everything"},
    {SolverKind::Sqrt, "sqrt", "Chen et al. sqrt(L) segments"},
    {SolverKind::RecomputeBlocks, "recompute-blocks", "checkpoint every stage input"},
    {SolverKind::RecomputeAll, "recompute-all", "keep only a_0, recompute the rest"},
    {SolverKind::OffloadAll, "offload-all", "checkpoint every stage input and offload each"},
    {SolverKind::Selective, "selective", "Megatron's rule: recompute every attention core, keep the rest"},
    {SolverKind::Pointwise, "pointwise", "recompute the elementwise stages, keep matmul outputs"},
};

const SolverKindInfo& info(SolverKind kind);
std::optional<SolverKind> solver_kind_from_word(std::string_view word);

// Empty when `kind` can plan for `chain`, otherwise why not and the fix: offload-all
// needs a link, selective and pointwise a stage of their role.
std::string solver_needs(SolverKind kind, const Chain& chain);

struct SolveOptions {
  int64_t budget_bytes = 0;
  SolverKind solver = SolverKind::Optimal;
  int slots = 500;
  int num_threads = 0;
  // On an infeasible budget, bisect for the smallest budget that works (tens of
  // solves) so the error can name it; off when only feasibility matters.
  bool find_min_budget = true;
  // `optimal` only: plans the caller already has, typically the ones found at smaller
  // budgets of a sweep. Each that fits is a candidate too (Note [Known plans] in
  // optimal.cpp), so that a sweep's `optimal` never gets slower as the budget grows.
  std::vector<std::vector<Op>> known_plans;
  // `optimal` and `recompute-only`: the search's tuned numbers, each with its reason.
  SearchOptions search;
  // `optimal` and `recompute-only`: where the solves of this chain at this budget keep
  // the recompute table at the budget, filled by the first of them (Note [Tables shared
  // between solves] in table_shelf.h); null: each fills its own. A solve at another
  // budget, the search for the smallest budget that works among them, does not use it.
  std::shared_ptr<RecomputeTableShelf> tables;
};

// Whether the solver reads SolveOptions::tables: `optimal` and `recompute-only`.
bool reads_shared_tables(SolverKind kind);
// For a caller that solves several solvers in turn through one shelf: drops its tables
// once none of `still_to_solve` reads them, so that those solvers' own tables do not
// sit beside them (Note [Tables shared between solves] in table_shelf.h).
void drop_unread_tables(RecomputeTableShelf& shelf, std::span<const SolverKind> still_to_solve);

// Thrown when no schedule of the chosen solver fits the budget.
struct InfeasibleBudget : std::runtime_error {
  InfeasibleBudget(const std::string& what, int64_t min_budget_bytes, int64_t store_all_peak_bytes)
      : std::runtime_error(what),
        min_budget_bytes(min_budget_bytes),
        store_all_peak_bytes(store_all_peak_bytes) {}
  int64_t min_budget_bytes;      // smallest budget that works for this solver (-1: none)
  int64_t store_all_peak_bytes;
};

// Note [Largest problem] in limits.h: kMaxStages and kMaxTableBytes.

// Empty when `solve` can take this chain with these options, otherwise what is too
// large and the fix (fewer stages, fewer slots). solve() and min_feasible_budget()
// throw ProblemTooLarge with it; the CLI checks it before printing anything.
std::string check_problem_size(const Chain& chain, const SolveOptions& options);
struct ProblemTooLarge : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Solves, simulates, and throws std::logic_error if a returned schedule were over
// budget (a bug, never a result).
Schedule solve(const Chain& chain, const SolveOptions& options);

// Smallest budget (bytes) for which `solve` with these options succeeds, found by
// bisection between a lower bound and the store-all peak; -1 if none.
int64_t min_feasible_budget(const Chain& chain, const SolveOptions& options);

}  // namespace memopt::solver

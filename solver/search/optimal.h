// optimal.h: the `optimal` and `recompute-only` solvers -- every candidate plan, the
// searches from the offload DP's classes, and the plans the caller knows, each
// simulated exactly; the fastest that fits wins (Note [Optimal takes the best of
// everything] in optimal.cpp; docs/solver.md draws the pipeline).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/dp_options.h"
#include "solver/chain/schedule.h"
#include "solver/search/search_options.h"
#include "solver/search/table_shelf.h"

namespace memopt::solver {

// The fastest plan found that fits budget_bytes, or nullopt. In order: (1) the
// baselines, the recompute DP's plans (with its rounding slack), offload-all and the
// pipelined family; over a usable link, (2) for each start class the offload DP's
// plan among them, polished, and (3) the starts over the budget and those that keep a
// stage; (4) the kicks; (5) the plans of the blocks; then (6) `known_plans`.
// `tables`, if given, holds the recompute table at the budget for the other solves of
// this chain at this budget (Note [Tables shared between solves] in table_shelf.h).
std::optional<std::vector<Op>> plan_optimal(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                            const SearchOptions& options = {},
                                            const std::vector<std::vector<Op>>& known_plans = {},
                                            RecomputeTableShelf* tables = nullptr);

// Stage (1) without offloading: the fastest of the baselines and the recompute DP's
// plans that fits. `tables` as for plan_optimal: both read the same table.
std::optional<std::vector<Op>> plan_recompute_only(const Chain& chain, int64_t budget_bytes, const DpOptions& dp,
                                                   const SearchOptions& options = {},
                                                   RecomputeTableShelf* tables = nullptr);

// The most slots `optimal` may use on `chain` (Note [Largest problem] in limits.h): the
// recompute table's limit and, over a usable link, the offload DP's.
int64_t max_optimal_slots(const Chain& chain);

}  // namespace memopt::solver

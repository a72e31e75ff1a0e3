// budget.h: the two things every budget is read against -- the store-all peak (the
// 100% of a "60%" budget) and the smallest budget a solver can meet ("min") -- and
// the one conversion of a budget written as text into bytes.
#pragma once

#include <cstdint>
#include <string>

#include "solver/dp/baselines.h"  // store_all_peak_bytes
#include "solver/chain/chain.h"
#include "solver/search/solve.h"

namespace memopt::solver {

// "min": min_feasible_budget(chain, options), std::runtime_error when no budget
// works; otherwise parse_budget(text, store_all_peak_bytes(chain)): "4GiB", "60%",
// "4000000000". Throws std::invalid_argument for text that is neither.
int64_t budget_from_text(const std::string& text, const Chain& chain, const SolveOptions& options);

}  // namespace memopt::solver

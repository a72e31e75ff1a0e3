// budget.cpp: store-all peak and budget text, once for the CLI and memopt::optimize.
#include "solver/search/budget.h"

#include <stdexcept>

#include "solver/dp/baselines.h"
#include "solver/chain/units.h"

namespace memopt::solver {

int64_t budget_from_text(const std::string& text, const Chain& chain, const SolveOptions& options) {
  if (text == "min") {
    const int64_t budget = min_feasible_budget(chain, options);
    if (budget < 0)
      throw std::runtime_error("no budget works for solver " + std::string(info(options.solver).word));
    return budget;
  }
  return parse_budget(text, store_all_peak_bytes(chain));
}

}  // namespace memopt::solver

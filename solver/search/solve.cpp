// solve.cpp: dispatch by solver name, simulate, and explain infeasible budgets.
#include "solver/search/solve.h"

#include <algorithm>

#include "solver/dp/baselines.h"
#include "solver/dp/limits.h"
#include "solver/dp/offload.h"
#include "solver/search/optimal.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"

namespace memopt::solver {

const SolverKindInfo& info(SolverKind kind) {
  for (const auto& k : kSolverKinds)
    if (k.kind == kind) return k;
  throw std::logic_error("unknown SolverKind");
}

std::optional<SolverKind> solver_kind_from_word(std::string_view word) {
  for (const auto& k : kSolverKinds)
    if (k.word == word) return k.kind;
  return std::nullopt;
}

namespace {

DpOptions dp_options(const SolveOptions& o);

// The plan of solver o.solver at `budget_bytes`, or nullopt; the plans the caller
// knows count only `with_known_plans` (a feasibility probe has none to offer).
std::optional<std::vector<Op>> plan_with(const Chain& chain, const SolveOptions& o, int64_t budget_bytes,
                                         bool with_known_plans) {
  const DpOptions dp = dp_options(o);
  // Note [Tables shared between solves]: only at the budget the shelf was made for.
  RecomputeTableShelf* tables = budget_bytes == o.budget_bytes ? o.tables.get() : nullptr;
  switch (o.solver) {
    case SolverKind::Optimal:
      return plan_optimal(chain, budget_bytes, dp, o.search,
                          with_known_plans ? o.known_plans : std::vector<std::vector<Op>>{}, tables);
    case SolverKind::RecomputeOnly: return plan_recompute_only(chain, budget_bytes, dp, o.search, tables);
    case SolverKind::RotorCompat: return solve_recompute(chain, budget_bytes, dp);
    case SolverKind::OffloadAll: return offload_all(chain, budget_bytes, dp);
    case SolverKind::StoreAll: return store_all(chain, budget_bytes, dp);
    case SolverKind::Sqrt: return sqrt_segments(chain, budget_bytes, dp);
    case SolverKind::RecomputeBlocks: return recompute_blocks(chain, budget_bytes, dp);
    case SolverKind::RecomputeAll: return recompute_all(chain, budget_bytes, dp);
    case SolverKind::Selective: return selective(chain, budget_bytes, dp);
    case SolverKind::Pointwise: return pointwise(chain, budget_bytes, dp);
  }
  throw std::logic_error("unknown SolverKind");
}

// The most slots the solver may use on `chain`: the recompute table's limit and, for
// `optimal` over a link, the offload DP's.
int64_t max_slots(const Chain& chain, SolverKind kind) {
  return kind == SolverKind::Optimal ? max_optimal_slots(chain) : max_recompute_table_slots(chain);
}

DpOptions dp_options(const SolveOptions& o) {
  return {o.slots, o.solver == SolverKind::RotorCompat, o.num_threads};
}

bool solves(const Chain& chain, const SolveOptions& o, int64_t budget_bytes) {
  SolveOptions probe = o;
  probe.search.any_fitting_plan = true;  // Note [A probe asks only whether a plan fits] in optimal.cpp
  probe.tables.reset();  // a bisection's budgets would each leave a table on it
  return plan_with(chain, probe, budget_bytes, /*with_known_plans=*/false).has_value();
}

bool uses_dp(SolverKind kind) {
  return kind == SolverKind::Optimal || kind == SolverKind::RecomputeOnly || kind == SolverKind::RotorCompat;
}

}  // namespace

bool reads_shared_tables(SolverKind kind) {
  switch (kind) {
    case SolverKind::Optimal:
    case SolverKind::RecomputeOnly: return true;
    case SolverKind::RotorCompat:
    case SolverKind::StoreAll:
    case SolverKind::Sqrt:
    case SolverKind::RecomputeBlocks:
    case SolverKind::RecomputeAll:
    case SolverKind::OffloadAll:
    case SolverKind::Selective:
    case SolverKind::Pointwise: return false;
  }
  throw std::logic_error("unknown SolverKind");
}

void drop_unread_tables(RecomputeTableShelf& shelf, std::span<const SolverKind> still_to_solve) {
  if (std::none_of(still_to_solve.begin(), still_to_solve.end(), reads_shared_tables)) shelf.clear();
}

std::string solver_needs(SolverKind kind, const Chain& chain) {
  if (kind == SolverKind::OffloadAll && !chain.link)
    return "offload-all needs the host<->device bandwidth, but the profile has no `link`";
  const auto needs_role = [&](StageRole role) -> std::string {
    if (chain.has_role(role)) return "";
    return std::string(info(kind).word) + " recomputes the stages whose role is " + role_word(role) +
           ", and the profile marks none; make the profile at operator granularity (--granularity op)";
  };
  if (kind == SolverKind::Selective) return needs_role(StageRole::AttentionCore);
  if (kind == SolverKind::Pointwise) return needs_role(StageRole::Pointwise);
  return "";
}

std::string check_problem_size(const Chain& chain, const SolveOptions& options) {
  const int64_t L = chain.length();
  if (L > kMaxStages)
    return "/stages: the chain has " + std::to_string(L) + " stages, more than memopt solves (at most " +
           std::to_string(kMaxStages) + "; the DP's time grows as L³, so " + std::to_string(L) +
           " stages would take far too long -- Note [Largest problem] in solver/dp/limits.h); merge consecutive "
           "stages into larger ones, e.g. profile with `memopt profile --granularity block`";
  if (!uses_dp(options.solver) || options.slots < 1) return "";
  const int64_t pairs = (L + 1) * (L + 2) / 2;
  const int64_t table_bytes = pairs * (int64_t{options.slots} + 1) * 4;
  const bool offload_dp = options.solver == SolverKind::Optimal && chain.has_usable_link();
  const int64_t states_bytes = offload_dp ? offload_dp_bytes(chain.length(), options.slots) : 0;
  if (table_bytes > kMaxTableBytes || states_bytes > kMaxTableBytes) {
    const std::string what = table_bytes > kMaxTableBytes ? "the DP table" : "the offload DP's states";
    return what + " of " + std::to_string(options.slots) + " slots on " + std::to_string(L) + " stages needs " +
           format_bytes(std::max(table_bytes, states_bytes)) + ", more than the " + format_bytes(kMaxTableBytes) +
           " memopt allows; use " + std::to_string(max_slots(chain, options.solver)) +
           " slots or fewer (the default is " + std::to_string(SolveOptions{}.slots) + ")";
  }
  return "";
}

int64_t min_feasible_budget(const Chain& chain, const SolveOptions& options) {
  if (std::string e = check_problem_size(chain, options); !e.empty()) throw ProblemTooLarge(e);
  const int64_t store_all_peak = store_all_peak_bytes(chain);
  // Slot rounding can make the DP miss at exactly the store-all peak; look upwards.
  int64_t hi = std::max<int64_t>(store_all_peak, 1);
  int doublings = 0;
  while (!solves(chain, options, hi)) {
    if (++doublings > 8) return -1;
    hi *= 2;
  }
  // Feasibility is monotone in the budget: a larger budget rounds every size to
  // the same or fewer slots, and every DP condition is monotone in the sizes.
  int64_t lo = 0;  // infeasible: nothing fits in zero bytes
  while (hi - lo > std::max<int64_t>(1, hi / 100000)) {
    const int64_t mid = lo + (hi - lo) / 2;
    (solves(chain, options, mid) ? hi : lo) = mid;
  }
  return hi;
}

Schedule solve(const Chain& chain, const SolveOptions& options) {
  if (std::string e = validate(chain); !e.empty()) throw std::invalid_argument("invalid chain: " + e);
  if (std::string e = check_problem_size(chain, options); !e.empty()) throw ProblemTooLarge(e);
  if (options.budget_bytes <= 0) throw std::invalid_argument("the budget must be positive");
  if (std::string e = solver_needs(options.solver, chain); !e.empty()) throw std::invalid_argument(e);
  const auto ops = plan_with(chain, options, options.budget_bytes, /*with_known_plans=*/true);
  const std::string_view name = info(options.solver).word;
  if (!ops) {
    const int64_t store_all_peak = store_all_peak_bytes(chain);
    const int64_t min_budget = options.find_min_budget ? min_feasible_budget(chain, options) : -1;
    std::string msg = "no " + std::string(name) + " schedule fits a budget of " +
                      format_bytes(options.budget_bytes) + " (" + std::to_string(options.budget_bytes) + " B). ";
    if (min_budget > 0)
      msg += "The smallest budget that works is " + format_bytes(min_budget) + " (" + std::to_string(min_budget) +
             " B): solve for at least that";
    else if (options.find_min_budget)
      msg += "No budget up to 256x the store-all peak works";
    msg += "; storing everything peaks at " + format_bytes(store_all_peak) + " (" + std::to_string(store_all_peak) + " B).";
    throw InfeasibleBudget(msg, min_budget, store_all_peak);
  }
  const SimResult sim = simulate_timeline(chain, *ops);
  if (!sim.valid)
    throw std::logic_error("bug: solver " + std::string(name) + " returned an invalid schedule: " + sim.error);
  if (sim.peak_bytes > options.budget_bytes) {
    const std::string over = "solver " + std::string(name) + " returned a schedule peaking at " +
                             std::to_string(sim.peak_bytes) + " B, over the budget of " +
                             std::to_string(options.budget_bytes) + " B";
    // rotor's recurrence is known to do this (docs/formats.md, "rotor's published recurrence
    // (`rotor-compat`)"); ours never may.
    if (options.solver == SolverKind::RotorCompat)
      throw std::runtime_error(over + ": rotor's published recurrence checks the wrong gradient in its keep branch; use the "
                               "optimal solver");
    throw std::logic_error("bug: " + over);
  }
  Schedule s;
  s.solver = std::string(name);
  s.budget_bytes = options.budget_bytes;
  s.chain_length = chain.length();
  s.predicted = {sim.peak_bytes, sim.time_ms};
  s.ops = *ops;
  return s;
}

}  // namespace memopt::solver

// tradeoff.h: the memory/time trade-off sweep behind `memopt tradeoff` -- every
// solver at every budget, predicted by the simulator and optionally measured --
// and its JSON (tradeoff.json) and README. Solver-only: the measuring is passed in,
// so this builds and tests without LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stats.h"
#include "report/figures.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/search/solve.h"
#include "solver/chain/summary.h"

namespace memopt::report {

// "20%:100%:5%" (inclusive range; % of reference_bytes or byte sizes like 1GiB:4GiB:512MiB)
// or a comma list "30%,1GiB,100%". Sorted, duplicates removed; throws
// std::invalid_argument naming the part that is wrong.
std::vector<int64_t> parse_budget_list(const std::string& text, int64_t reference_bytes);

// What a plan does to one stage, as the map's colour: "kept" (stored on its only
// forward), "checkpointed" (its input is kept and it is recomputed from there),
// "recomputed" (recomputed from an earlier checkpoint), "offloaded" (its input went
// to the host), "saved-offloaded" (the saved state of its fwd_keep went to the host).
// Note [Stage categories] in tradeoff.cpp.
std::string stage_category(const solver::StageActivity& activity);

struct StagePlan {
  std::string category;
  int num_recomputes = 0;
  std::string description;  // solver::describe's words
};

// A schedule measured by runtime's Note [Measurement protocol]: warm-up steps, then
// interleaved rounds with every other schedule of the report.
struct MeasuredPoint {
  int64_t peak_bytes = 0;           // median over the measured steps (allocated bytes)
  int64_t reserved_peak_bytes = -1; // the most the allocator held, -1: unknown
  common::Spread time_ms;           // median and interquartile range over the measured steps
  int steps = 0;                    // measured steps
  int warmup_steps = 0;
  std::optional<double> max_abs_grad_diff;
  std::string same_ops_as;  // non-empty: identical ops were measured at this point ("<solver>@<budget>")
  // The schedule's time predicted from stage times taken in the measured rounds
  // themselves (Note [Stage times from the measured rounds] in runtime/measured_run.h);
  // unset where they were not taken.
  std::optional<double> predicted_in_rounds_ms;
};

struct TradeoffPoint {
  std::string solver;
  int64_t budget_bytes = 0;
  std::string status;  // outcome_word (solver_comparison.h): "ok", "infeasible", "needs-link"
  int64_t predicted_peak_bytes = 0;
  double predicted_time_ms = 0;
  int num_ops = 0;
  std::vector<StagePlan> stages;  // empty unless ok
  std::optional<MeasuredPoint> measured;
};

struct TradeoffReport {
  std::string command;
  std::string profile_path;
  nlohmann::json model = nlohmann::json::object();
  nlohmann::json profile_device = nlohmann::json::object();  // where the profile was measured (or modeled)
  nlohmann::json machine = nlohmann::json::object();         // where this report ran
  bool profile_measured = true;
  int slots = 500;
  std::optional<double> link_bytes_per_s;
  int64_t store_all_peak_bytes = 0;
  double base_time_ms = 0;  // every stage forward and backward once (store-all's predicted time)
  std::vector<std::string> stage_names;
  std::vector<int64_t> budgets_bytes;
  std::vector<std::string> solvers;
  std::map<std::string, int64_t> min_budget_bytes;  // per solver, -1: none
  std::optional<MeasuredPoint> measured_base;       // store-all measured without a budget
  // Where the stage times behind the plans and predictions come from: "profile", or
  // "this process" (re-timed before measuring, Note [Stage times from this process]).
  std::string predicted_times = "profile";
  std::vector<TradeoffPoint> points;                // budget-major, solver-minor
};

struct TradeoffOptions {
  std::vector<int64_t> budgets_bytes;
  std::vector<solver::SolverKind> solvers;
  int slots = 500;
  int threads = 0;  // for the DP
  bool find_min_budgets = true;
};

// Measures distinct schedules together, one result each in order
// (runtime::ProfiledModel::measure_interleaved in the CLI). The first is store-all.
using MeasureFn = std::function<std::vector<MeasuredPoint>(const std::vector<solver::Schedule>&)>;
// Called after each point with (points done, total, the point).
using ProgressFn = std::function<void(int, int, const TradeoffPoint&)>;

// The solvers a report compares by default: optimal, recompute-only, sqrt,
// recompute-blocks, recompute-all, store-all, offload-all, and selective and pointwise
// when the chain marks stages of their roles (operator granularity).
std::vector<solver::SolverKind> default_tradeoff_solvers(const solver::Chain& chain);

TradeoffReport sweep(const solver::Profile& profile, const TradeoffOptions& options, const MeasureFn& measure = {},
                     const ProgressFn& progress = {});

// The point was measured faster than store-all beyond both spreads (its time's upper
// quartile below store-all's lower one): a plan that stores less cannot compute less,
// so the testbed, not the plan, made that difference; reports flag it.
bool measured_faster_than_store_all(const TradeoffReport& report, const TradeoffPoint& point);

nlohmann::ordered_json to_json(const TradeoffReport& report);
// Throws std::invalid_argument naming the field when j is not a tradeoff.json.
TradeoffReport tradeoff_from_json(const nlohmann::json& j);

// The figures tools/plot_tradeoff.py draws into a report folder that exist in `dir`,
// with their captions.
std::vector<Figure> tradeoff_figures(const std::string& dir);

// README.md for the report folder: the claim, the command, the machine, the table, and
// `figures` (files in the folder) with their captions.
std::string tradeoff_readme(const TradeoffReport& report, const std::vector<Figure>& figures);

// {"cpu": lscpu's model name, "cores": n, "os": uname}, read from /proc and uname.
nlohmann::json this_machine();

}  // namespace memopt::report

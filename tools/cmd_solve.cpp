// cmd_solve.cpp: `memopt solve` -- profile + budget -> schedule.json, with a table
// comparing every solver at that budget and what the chosen one does to each stage.
//   memopt solve --profile P.json --budget 60% --out S.json
#include <cstdio>
#include <string>

#include "report/solver_comparison.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "solver/chain/summary.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/profile_flags.h"
#include "tools/report_table.h"

namespace memopt::tools {
namespace {

struct SolveArgs {
  std::string profile_path, budget_text, out_path;
  std::string solver = "optimal";
  std::string bandwidth;  // overrides the profile's link, both directions
  std::string emulate;    // or sets it to a GPU's link at this testbed's speed
  int slots = 500;
  int threads = 0;
};

void run_solve(const SolveArgs& args) {
  using namespace memopt::solver;
  Profile profile = read_profile(args.profile_path);
  apply_bandwidth_flag(profile, args.bandwidth);
  apply_emulate_flag(profile, args.emulate, args.bandwidth);
  const Chain& chain = profile.chain;
  const auto kind = solver_kind_from_word(args.solver);
  if (!kind) throw std::invalid_argument("--solver: unknown solver '" + args.solver + "'; choose one of " + solver_words());
  if (args.slots < 1 || args.slots > 1000000)
    throw std::invalid_argument("--slots: " + std::to_string(args.slots) + " is out of range; use 1 to 1000000 (default 500)");

  SolveOptions options{0, *kind, args.slots, args.threads};
  // Before anything runs: a chain too large for the DP must not hang the comparison table.
  check_problem_size_flags(chain, options, args.profile_path);
  const int64_t store_all_peak = store_all_peak_bytes(chain);
  try {
    options.budget_bytes = budget_from_text(args.budget_text, chain, options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--budget: ") + e.what());
  }
  const int64_t budget = options.budget_bytes;
  print_profile_header(args.profile_path, profile, store_all_peak);
  std::printf("budget   %s (%.1f%% of store-all), %d slots\n\n", format_bytes(budget).c_str(),
              100.0 * static_cast<double>(budget) / static_cast<double>(store_all_peak), args.slots);

  // The chosen solver runs once: its row of the table is the schedule written. The
  // smallest budget that works is searched for only where it does not fit, by the
  // solve below that raises the error.
  SolveOptions at_budget = options;
  at_budget.find_min_budget = false;
  at_budget.tables = std::make_shared<RecomputeTableShelf>();  // the chosen solve's and the other rows'
  const report::SolveAttempt chosen = report::attempt_solve(chain, at_budget);
  print_solver_comparison(chain, at_budget, chosen);

  // The solver names quantities; say which flag sets them (solving again, only to
  // raise its error).
  Schedule schedule = [&] {
    if (chosen.schedule) return *chosen.schedule;
    try {
      return solve(chain, options);
    } catch (const InfeasibleBudget& e) {
      if (e.min_budget_bytes <= 0) throw;
      throw InfeasibleBudget(std::string(e.what()) + " Pass --budget " + std::to_string(e.min_budget_bytes) +
                                 ", or --budget min.",
                             e.min_budget_bytes, e.store_all_peak_bytes);
    } catch (const std::invalid_argument& e) {
      if (*kind != SolverKind::OffloadAll || chain.link) throw;
      throw std::invalid_argument(std::string(e.what()) + "; pass --bandwidth to give it one");
    } catch (const std::runtime_error& e) {
      if (*kind != SolverKind::RotorCompat) throw;
      throw std::runtime_error(std::string(e.what()) + " (--solver optimal)");
    }
  }();
  schedule.profiled_on = profiled_on(profile);
  std::printf("\nstages under %s:\n", schedule.solver.c_str());
  print_stage_activity(chain, schedule.ops);
  if (!args.out_path.empty()) {
    write_json_atomic(args.out_path, schedule_to_json(schedule));
    std::printf("\nwrote %s (%zu ops)\n", args.out_path.c_str(), schedule.ops.size());
  }
}

}  // namespace

void add_solve_command(CLI::App& app) {
  auto args = std::make_shared<SolveArgs>();
  CLI::App* cmd = app.add_subcommand("solve", "Compute the fastest schedule that fits a memory budget");
  cmd->add_option("--profile", args->profile_path, "profile.json from `memopt profile`")->required();
  cmd->add_option("--budget", args->budget_text,
                  "activation budget: 4GiB, 3.5GB, 4000000000, 60% (of the store-all peak), or min (the smallest that works)")->required();
  cmd->add_option("--solver", args->solver, solver_words("|"))
      ->capture_default_str();
  cmd->add_option("--bandwidth", args->bandwidth,
                  "host<->device link for offloading, e.g. 16GB/s (default: the profile's link; none: no offload)");
  cmd->add_option("--emulate", args->emulate, "emulate GPU:LINK[:DTYPE] on this CPU, e.g. h100-sxm:pcie5 or gh200:nvlink-c2c: the copy link at that GPU's ratio of link to compute");
  cmd->add_option("--slots", args->slots, "memory discretisation of the DP (finer wastes less budget)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "threads for the DP (0: all cores)")->capture_default_str();
  cmd->add_option("--out", args->out_path, "where to write schedule.json");
  cmd->callback([args] { run_solve(*args); });
}

}  // namespace memopt::tools

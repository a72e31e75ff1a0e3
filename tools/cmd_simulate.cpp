// cmd_simulate.cpp: `memopt simulate` -- re-check a schedule file against a profile
// (validity, peak, time). A schedule edited by hand is checked, never trusted.
//   memopt simulate --profile P.json --schedule S.json
#include <cstdio>
#include <stdexcept>
#include <string>

#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/io/schedule_check.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/report_table.h"

namespace memopt::tools {
namespace {

struct SimulateArgs {
  std::string profile_path, schedule_path;
};

void run_simulate(const SimulateArgs& args) {
  using namespace memopt::solver;
  const Profile profile = read_profile(args.profile_path);
  const Schedule schedule = read_schedule(args.schedule_path);
  const SimResult r = check_schedule_for_chain(schedule, profile.chain, args.schedule_path, args.profile_path);
  std::printf("schedule %s: valid, %zu ops, solver %s\n", args.schedule_path.c_str(), schedule.ops.size(),
              schedule.solver.c_str());
  std::printf("  peak   %s (%lld B), budget %s: %s\n", format_bytes(r.peak_bytes).c_str(),
              static_cast<long long>(r.peak_bytes), format_bytes(schedule.budget_bytes).c_str(),
              r.peak_bytes <= schedule.budget_bytes ? "fits" : "OVER BUDGET");
  std::printf("  time   %.3f ms (the file predicts %.3f ms, peak %lld B)\n", r.time_ms,
              schedule.predicted.time_ms, static_cast<long long>(schedule.predicted.peak_bytes));
  if (r.copy_ms > 0) std::printf("  copies %.3f ms on the links, compute stalled %.3f ms\n", r.copy_ms, r.stall_ms);
  std::printf("stages:\n");
  print_stage_activity(profile.chain, schedule.ops);
  if (r.peak_bytes > schedule.budget_bytes)
    throw std::runtime_error("the schedule peaks " + format_bytes(r.peak_bytes - schedule.budget_bytes) +
                             " over its budget");
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Check a schedule against a profile: validity, peak, time");
  cmd->add_option("--profile", args->profile_path, "profile.json")->required();
  cmd->add_option("--schedule", args->schedule_path, "schedule.json")->required();
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace memopt::tools

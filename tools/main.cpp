// main.cpp: the memopt command-line tool.
//   memopt profile ...   measure a model into profile.json
//   memopt solve ...     profile + budget -> schedule.json
//   memopt simulate ...  re-check a schedule against a profile
//   memopt run ...       train along a schedule, measured vs predicted
//   memopt tradeoff ...  every solver at every budget: report folder with figures
//   memopt estimate ...  modeled profile (and fit chart) for a GPU
//   memopt plan ...      per-rank static bytes under ZeRO/pipeline, budget left, schedules
//   memopt train ...     distributed training under a launcher (ZeRO, 1F1B)
// `memopt <command> --help` lists each command's flags.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"memopt: fit transformer training into a memory budget by recomputing and offloading activations"};
  app.require_subcommand(1);
  // Note [Program name in a recorded command]
  const std::string command_line = memopt::common::command_line("memopt", argc, argv);
  memopt::tools::add_solve_command(app);
  memopt::tools::add_simulate_command(app);
  memopt::tools::add_tradeoff_command(app, command_line);
  memopt::tools::add_plan_command(app);
  memopt::tools::add_estimate_command(app, command_line);
#ifdef MEMOPT_WITH_TORCH
  memopt::tools::add_profile_command(app);
  memopt::tools::add_run_command(app);
  memopt::tools::add_link_command(app);
#endif
#ifdef MEMOPT_WITH_DISTRIBUTED
  memopt::tools::add_train_command(app);
#endif
  memopt::tools::add_missing_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Flag errors read like every other memopt error: one line, then where to look.
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    const std::string help = chosen.empty() ? "memopt --help" : "memopt " + chosen.front()->get_name() + " --help";
    std::fprintf(stderr, "memopt: error: %s; `%s` lists the flags\n", e.what(), help.c_str());
    return e.get_exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memopt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

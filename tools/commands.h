// commands.h: the memopt CLI's subcommands. Each cmd_*.cpp adds one to the app and
// holds no logic beyond parsing flags, calling the libraries and printing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace memopt::tools {

// `command_line` is the command as invoked (common/command_line.h), which the
// commands that write reports record so that they can be regenerated.
void add_solve_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_tradeoff_command(CLI::App& app, const std::string& command_line);
void add_plan_command(CLI::App& app);
void add_estimate_command(CLI::App& app, const std::string& command_line);
#ifdef MEMOPT_WITH_TORCH
void add_profile_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_link_command(CLI::App& app);
#endif
#ifdef MEMOPT_WITH_DISTRIBUTED
void add_train_command(CLI::App& app);
#endif
// The commands this build leaves out (profile, run, link, train), each failing with the
// option that builds it instead of a parse error.
void add_missing_commands(CLI::App& app);

}  // namespace memopt::tools

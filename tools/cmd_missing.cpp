// cmd_missing.cpp: the subcommands this build of memopt leaves out -- profile, run and
// link without LibTorch, train without LibTorch or Gloo -- registered anyway, so that
// `memopt profile ...` says how to build it rather than "unexpected argument".
#include <stdexcept>
#include <string>

#include "tools/commands.h"

namespace memopt::tools {
namespace {

[[maybe_unused]] void add_missing(CLI::App& app, const std::string& name, const std::string& what,
                                  const std::string& fix) {
  CLI::App* cmd = app.add_subcommand(name, what + " (not in this build)");
  cmd->allow_extras();  // whatever flags follow, the answer is the same
  cmd->callback([name, fix] { throw std::runtime_error(name + ": " + fix); });
}

}  // namespace

void add_missing_commands(CLI::App& app) {
#ifndef MEMOPT_WITH_TORCH
  const std::string no_torch = "this memopt was built without LibTorch; rebuild with MEMOPT_TORCH=ON (scripts/build.sh)";
  add_missing(app, "profile", "Measure a model's stages into profile.json", no_torch);
  add_missing(app, "run", "Train a few steps along a schedule", no_torch);
  add_missing(app, "link", "Measure the copy engine", no_torch);
  add_missing(app, "train", "Distributed training under a launcher", no_torch);
#elif !defined(MEMOPT_WITH_DISTRIBUTED)
  add_missing(app, "train", "Distributed training under a launcher",
              "this memopt was built without Gloo's headers; install libgloo-dev (scripts/setup.sh) and rebuild");
#else
  (void)app;
#endif
}

}  // namespace memopt::tools

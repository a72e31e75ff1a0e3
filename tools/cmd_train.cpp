// cmd_train.cpp: `memopt train` -- data-parallel (ZeRO 0-3) and pipeline (1F1B)
// training of the model a profile describes, one process per rank, started by a
// launcher that sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK:
//   torchrun --nproc-per-node 2 build/tools/memopt train --profile P.json --steps 3 --zero-stage 3
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "distributed/trainer.h"
#include "solver/io/profile_json.h"
#include "solver/io/schedule_json.h"
#include "tools/commands.h"

namespace memopt::tools {
namespace {

struct TrainArgs {
  std::string profile_path, out_prefix;
  std::vector<std::string> schedule_paths;
  distributed::TrainOptions options;
  double timeout_s = 60;
};

void run_train(TrainArgs& a) {
  namespace dist = memopt::distributed;
  const dist::LaunchEnv env = dist::launch_env();
  const solver::Profile profile = solver::read_profile(a.profile_path);
  dist::TrainOptions o = a.options;
  for (const std::string& path : a.schedule_paths) {
    o.schedules.push_back(solver::read_schedule(path));
    o.schedule_sources.push_back(path);
  }
  o.out_prefix = a.out_prefix;
  if (a.timeout_s <= 0) throw std::invalid_argument("--timeout: must be positive (seconds)");
  o.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  o.log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  try {
    dist::train(profile, o, env);
  } catch (const dist::DistributedError& e) {
    // Exit now: tearing down a process group whose peer is gone can block in Gloo's
    // destructors, and a launcher must see this rank fail rather than hang.
    std::fprintf(stderr, "memopt: error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Distributed training under a launcher: ZeRO data parallelism, 1F1B pipeline, memopt schedules");
  cmd->add_option("--profile", a->profile_path, "profile.json describing the model")->required();
  cmd->add_option("--schedule", a->schedule_paths,
                  "schedule.json, one per pipeline stage in order (memopt plan --out writes them); default store-all");
  cmd->add_option("--steps", a->options.steps, "training steps (AdamW)")->capture_default_str();
  cmd->add_option("--zero-stage", a->options.zero_stage, "0 (data parallel), 1, 2 or 3")->capture_default_str();
  cmd->add_option("--pipeline-stages", a->options.pipeline_stages, "pipeline stages P; WORLD_SIZE = data-parallel x P")
      ->capture_default_str();
  cmd->add_option("--micro-batches", a->options.micro_batches, "micro-batches per step and replica")->capture_default_str();
  cmd->add_option("--lr", a->options.adamw.lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", a->options.adamw.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--adam-eps", a->options.adamw.eps, "AdamW epsilon")->capture_default_str();
  cmd->add_option("--threads", a->options.threads, "compute threads per rank")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "seconds any rank waits for the others before failing")->capture_default_str();
  cmd->add_option("--out", a->out_prefix, "write <out>.rank<r>.bin (parameters) and <out>.rank<r>.json (measurements), atomically");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace memopt::tools

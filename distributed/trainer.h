// trainer.h: `memopt train` -- the GPT-2 a profile describes, trained by ranks laid
// out as D data-parallel replicas x P pipeline stages (global rank = d * P + k), with
// ZeRO inside each pipeline stage's data-parallel group, 1F1B across pipeline stages,
// and each pipeline stage replaying its own memopt schedule. The global batch (the
// profile's B rows) is split across the D replicas and M micro-batches.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "distributed/flat_adamw.h"
#include "distributed/launch_env.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"

namespace memopt::distributed {

struct TrainOptions {
  int steps = 1;
  int zero_stage = 0;
  int pipeline_stages = 1;   // P
  int micro_batches = 1;     // M (per replica and step)
  AdamWConfig adamw;
  int threads = 1;           // compute threads per rank
  // One schedule per pipeline stage, made for that stage's sub-chain (`memopt plan`
  // writes them); empty: store-all everywhere. `schedule_sources` name them in errors.
  std::vector<solver::Schedule> schedules;
  std::vector<std::string> schedule_sources;
  // When set, each rank writes "<prefix>.rank<r>.bin" (its parameters after the last
  // step) and "<prefix>.rank<r>.json" (what it measured), each atomically.
  std::string out_prefix;
  CommOptions comm;
  std::function<void(const std::string&)> log;  // progress lines (one rank prints)
};

struct TrainStep {
  double loss = 0;        // global batch mean (reported by the last pipeline stage)
  double time_ms = 0;
  int64_t peak_bytes = 0; // measured: device bytes at the step's peak above the model's non-parameter baseline
};

struct TrainResult {
  int rank = 0, data_rank = 0, pipeline_rank = 0;
  int chain_begin = 0, chain_end = 0;   // this pipeline stage's chain stages
  int64_t rows_per_micro_batch = 0;
  int64_t persistent_bytes = 0;         // measured between steps by the counting allocator
  int64_t engine_persistent_bytes = 0;  // what ZeroEngine says it holds
  int max_in_flight = 0;
  int64_t num_gathers = 0;              // ZeRO-3 bucket all-gathers during the steps
  std::vector<TrainStep> steps;
};

// Validates the layout (WORLD_SIZE = D x P, B divisible by D x M, schedules that fit)
// with errors naming the flag, then trains. Throws DistributedError when a peer fails.
TrainResult train(const solver::Profile& profile, const TrainOptions& options, const LaunchEnv& env);

// Note [Parameter files]
// With an output prefix each rank writes the parameters it holds after training as
// <prefix>.rank<r>.safetensors (model/hf_weights.h reads and writes the format): one
// tensor per parameter, named by its index in StagedModel::parameters() of the whole
// model ("0", "1", ...), shaped as in the model. A pipeline rank holds its stages'
// parameters, a ZeRO rank all of them (gathered), so together the files cover the model.

}  // namespace memopt::distributed

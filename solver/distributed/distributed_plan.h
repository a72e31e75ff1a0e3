// distributed_plan.h: the activation budget each rank has left once ZeRO has placed
// parameters, gradients and optimizer state, and the memopt schedule of every
// pipeline stage for it -- what `memopt plan` prints and `memopt train` runs.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"
#include "solver/search/solve.h"
#include "solver/distributed/zero_memory.h"

namespace memopt::solver {

struct DistributedLayout {
  int world_size = 1;
  int zero_stage = 0;
  int pipeline_stages = 1;   // P; world_size = data-parallel D x P
  int micro_batches = 1;     // M
  int64_t batch_rows = 0;    // the profile's B, split into D x M micro-batches
};

// D = world_size / pipeline_stages data-parallel ranks, and the rows of one
// micro-batch, batch_rows / (D x M). Valid once plan_distributed accepted the layout.
int data_parallel_ranks(const DistributedLayout& layout);
int64_t micro_batch_rows(const DistributedLayout& layout);

// Where pipeline stage `stage` of a plan with `num_stages` stages is written when the
// plan goes to `out_path`: out_path itself for one stage, else S.stage<k>.json for
// S.json (S.stage<k> + the rest when out_path has no ".json"). `memopt train
// --schedule` takes these files in stage order.
std::string stage_schedule_path(const std::string& out_path, int stage, int num_stages);

struct PipelineStagePlan {
  int begin = 0, end = 0;         // chain stages [begin, end)
  Chain chain;                    // its sub-chain at the micro-batch's rows (modeled scaling)
  ZeroMemory zero;                // per rank of this pipeline stage
  int in_flight = 1;              // min(P - k, M) micro-batches held at once under 1F1B
  int64_t activation_budget_bytes = 0;     // device memory - zero.static_bytes()
  int64_t micro_batch_budget_bytes = 0;    // activation_budget / in_flight
  Schedule schedule;              // solved for micro_batch_budget_bytes
};

// A layout memopt cannot plan: counts below 1, ranks that do not divide into the
// pipeline stages, or static bytes that leave a device nothing for activations. The
// message names the quantities; the CLI says which of its flags set them.
struct LayoutError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Throws LayoutError, std::invalid_argument for a profile without what the plan
// needs, and InfeasibleBudget (from solve) when a stage's budget is too small.
std::vector<PipelineStagePlan> plan_distributed(const Chain& chain, const DistributedLayout& layout,
                                                int64_t device_bytes, const SolveOptions& solve_options,
                                                const std::string& source);

}  // namespace memopt::solver

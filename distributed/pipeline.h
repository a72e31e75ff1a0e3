// pipeline.h: one training step of a pipeline stage over micro-batches with the
// 1F1B schedule (Narayanan et al. 2019, PipeDream-Flush): stage k of P runs
// min(P-k-1, M) warm-up forwards, then alternates one forward and one backward, then
// drains the backwards -- so at most min(P-k, M) micro-batches are in flight on it.
// Activations go forward and gradients back with c10d send/recv; every micro-batch
// runs the stage's own memopt schedule (recompute, offload) through the executor.
// With P = 1 it is plain gradient accumulation over M micro-batches.
#pragma once

#include <memory>
#include <vector>

#include "distributed/comm.h"
#include "model/staged_model.h"
#include "runtime/executor.h"
#include "solver/chain/schedule.h"

namespace memopt::distributed {

struct PipelineStage {
  const model::StagedModel* model = nullptr;  // this pipeline stage's chain stages
  int rank = 0;                        // k
  int size = 1;                        // P
  Comm* group = nullptr;               // the P pipeline ranks (null when P = 1)
  std::vector<solver::Op> ops;         // its schedule
  runtime::StageHooks* hooks = nullptr;         // ZeRO
  // One copy engine per micro-batch in flight (min(P-k, M) of them) when the
  // schedule offloads: each engine's host pool is recycled when its micro-batch ends.
  std::vector<runtime::CpuCopyEngine*> copy_engines;
  // ExecutorOptions::offload_done_before for `ops` (runtime/copy_plan.h).
  std::vector<int> offload_done_before;
  // d(loss)/d(micro-batch loss): 1 / (data-parallel ranks x micro-batches), so that
  // the summed gradients are those of the global batch's mean loss.
  double loss_scale = 1.0;
};

struct PipelineStepResult {
  double loss_sum = 0;        // sum of the micro-batch losses (last pipeline stage only)
  int max_in_flight = 0;      // measured: most micro-batches held at once
};

// Runs forward and backward of every micro-batch (inputs and targets: the rows of
// this rank; a later stage's inputs arrive from the previous stage). Gradients
// accumulate into the model's parameters (or the hooks' partitions).
PipelineStepResult run_1f1b(const PipelineStage& stage, const std::vector<model::Batch>& micro_batches);

}  // namespace memopt::distributed

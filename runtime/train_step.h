// train_step.h: one measured training step along a schedule, and the same step done
// by plain autograd for comparison -- what `memopt run` and the tests build on.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "measure/memory_meter.h"
#include "measure/timer.h"
#include "model/staged_model.h"
#include "runtime/executor.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {

struct StepResult {
  double loss = 0;                  // a_L when the model ends with its loss
  int64_t activation_peak_bytes = 0;  // measured, in the budget's sense: a_0 included, parameters/grads/optimizer not
  double time_ms = 0;               // the whole step, on the caller's Timer (CUDA: device time by events)
  CopyStats copies;                 // offload/prefetch traffic (scheduled steps only)
};

// Gives every parameter a zero gradient, allocating it if needed, so that gradient
// storage exists before a step's baseline (Note [Stage byte accounting]).
void zero_grads_in_place(const model::StagedModel& model);

// One forward + backward along `ops`; parameter gradients accumulate into .grad.
// The baseline is taken at entry, so call zero_grads_in_place first. `timer` times
// the step (null: the host's steady clock, which is the work's time on the CPU only).
StepResult run_scheduled_step(const model::StagedModel& model, const std::vector<solver::Op>& ops, const model::Batch& batch,
                              measure::MemoryMeter& meter, const ExecutorOptions& options = {},
                              measure::Timer* timer = nullptr);

// The same step by plain autograd on the whole chain (forward(), then backward()),
// with the same meter reading.
StepResult run_plain_step(const model::StagedModel& model, const model::Batch& batch, measure::MemoryMeter& meter,
                          measure::Timer* timer = nullptr);

// Copies of every parameter's gradient, in StagedModel::parameters() order.
std::vector<at::Tensor> gradients(const model::StagedModel& model);

// max |a - b| over all elements of all pairs, and the largest |b| seen (for
// relative tolerances).
struct GradientDiff {
  double max_abs_diff = 0;
  double max_abs_ref = 0;
};
GradientDiff compare_gradients(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref);

}  // namespace memopt::runtime

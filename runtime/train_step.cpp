// train_step.cpp: measured scheduled and plain steps.
#include "runtime/train_step.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

namespace memopt::runtime {
namespace {

// The caller's timer, or the host's clock.
measure::Timer& timer_or_host(measure::Timer* timer, measure::CpuTimer& host) {
  return timer ? *timer : host;
}

// Note [Reading the loss without a sync]
// On a GPU, .item() waits for the whole forward before the backward can be queued,
// which leaves the device idle while the host launches it. The loss is copied into
// pinned host memory instead (not device memory, so not counted), queued on the
// compute stream, and read once the step's timer has waited for the stream.
struct LossReading {
  at::Tensor host;
  void take(const at::Tensor& a_L, double& loss) {
    if (a_L.numel() != 1) return;
    if (a_L.is_cpu()) {
      loss = a_L.item<double>();
      return;
    }
    host = at::empty({}, a_L.options().device(c10::kCPU).pinned_memory(true).requires_grad(false));
    host.copy_(a_L.detach(), /*non_blocking=*/true);
  }
  void finish(double& loss) const {
    if (host.defined()) loss = host.item<double>();
  }
};

// a_0 exists before a plain step starts, yet the budget counts it.
int64_t input_bytes(const model::Batch& batch) { return static_cast<int64_t>(batch.input.nbytes()); }

}  // namespace

void zero_grads_in_place(const model::StagedModel& model) {
  for (const at::Tensor& p : model.parameters()) {
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    if (g.defined()) g.zero_();
    else g = at::zeros_like(p);
  }
}

StepResult run_scheduled_step(const model::StagedModel& model, const std::vector<solver::Op>& ops, const model::Batch& batch,
                              measure::MemoryMeter& meter, const ExecutorOptions& options, measure::Timer* timer) {
  StepResult r;
  const int64_t baseline = meter.current_bytes();
  meter.reset_peak();
  measure::CpuTimer host;
  measure::Timer& clock = timer_or_host(timer, host);
  LossReading loss;
  clock.start();
  {
    ScheduleRunner runner(model, ops, options);
    // Note [The step owns a_0]
    // The budget counts a_0 from the step's start, and `offload 0` frees it on the
    // device. So the step holds the only handle on a copy of the input, allocated
    // after the baseline: the meter then sees a_0 arrive, leave and come back exactly
    // as the simulator does. The loss is read and let go before the backward, which
    // needs only d_L: holding a_L through it would keep 4 bytes the plan freed.
    {
      const at::Tensor a_L = runner.run_forward(model::Batch{batch.input.clone(), batch.targets, batch.step_inputs});
      loss.take(a_L, r.loss);
    }
    runner.run_backward();
    r.copies = runner.copy_stats();
  }
  r.time_ms = clock.stop_ms();
  loss.finish(r.loss);
  r.activation_peak_bytes = meter.peak_bytes() - baseline;
  return r;
}

StepResult run_plain_step(const model::StagedModel& model, const model::Batch& batch, measure::MemoryMeter& meter,
                          measure::Timer* timer) {
  StepResult r;
  const int64_t baseline = meter.current_bytes();
  meter.reset_peak();
  measure::CpuTimer host;
  measure::Timer& clock = timer_or_host(timer, host);
  LossReading loss;
  clock.start();
  {
    at::Tensor out = model.forward(batch);
    loss.take(out, r.loss);
    torch::autograd::backward({out}, {at::ones_like(out)});
  }
  r.time_ms = clock.stop_ms();
  loss.finish(r.loss);
  r.activation_peak_bytes = meter.peak_bytes() - baseline + input_bytes(batch);
  return r;
}

std::vector<at::Tensor> gradients(const model::StagedModel& model) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : model.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  return out;
}

GradientDiff compare_gradients(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& ref) {
  GradientDiff d;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    d.max_abs_diff = std::max(d.max_abs_diff, (got[i] - ref[i]).abs().max().item<double>());
    d.max_abs_ref = std::max(d.max_abs_ref, ref[i].abs().max().item<double>());
  }
  return d;
}

}  // namespace memopt::runtime

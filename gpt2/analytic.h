// analytic.h: the profiler's plain twin for GPT-2 -- every stage's output, saved,
// forward-transient and backward-transient bytes computed from shapes and dtype, op by
// op, from what model/gpt2.cpp runs and what autograd runs for it. A test holds
// the measured profile to it (and it to the measurement): when they disagree, one of
// them has a bug.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2/config.h"
#include "gpt2/stages.h"

namespace memopt::gpt2 {

struct AnalyticStage {
  std::string name;
  int64_t out_bytes = 0;             // x_{i+1}
  int64_t saved_bytes = 0;           // x̄_{i+1}, output included, input excluded
  int64_t fwd_tmp_grad_bytes = 0;    // forward peak above input + saved, under autograd
  int64_t fwd_tmp_nograd_bytes = 0;  // forward peak above input + output, without grad
  // The backward's transient, as the profiler measures it (Note [Stage byte accounting]
  // in profiler.h): its peak above what was live when it started (input, saved bytes
  // and the seed gradient, with parameters and their .grad already allocated) less
  // x_i -- the input's bytes, token ids included although they get no gradient --
  // clamped at 0. The peak includes the input gradient d_i once it exists and the
  // parameters' transient gradients before AccumulateGrad adds them into .grad.
  int64_t bwd_tmp_bytes = 0;
  // The residual stream passed through beside the output (Note [Operator stages] in
  // gpt2/stages.h), counted in out_bytes and saved_bytes.
  int64_t carried_bytes = 0;
};

// Stage by stage as stage_layout() (gpt2/stages.h) cuts the model, in training mode (dropout
// as configured), float32. `threads` matters only to per-thread kernel scratch: the
// CPU flash-attention kernels' (sdpa without dropout) and LayerNorm's backward buffer.
// bwd_tmp_bytes is exact for one thread, as the profiler runs by default.
std::vector<AnalyticStage> gpt2_analytic_stages(const gpt2::Gpt2Config& config,
                                                const gpt2::Gpt2Workload& workload, int threads = 1);

// a_0: the int64 token ids.
int64_t gpt2_analytic_input_bytes(const gpt2::Gpt2Workload& workload);
// The float32 parameters, wte counted once (tied to the head).
int64_t gpt2_analytic_parameter_bytes(const gpt2::Gpt2Config& config);

}  // namespace memopt::gpt2

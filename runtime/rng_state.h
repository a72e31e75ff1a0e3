// rng_state.h: the random generators a stage's forward draws from, captured and put
// back -- the CPU's default generator always, and the default generator of the
// accelerator the step computes on (CUDA: its Philox seed and offset, which ATen's
// dropout and sdpa's dropout draw from). Note [Recompute RNG] in executor.h says why.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/MT19937RNGEngine.h>
#include <c10/core/Device.h>

namespace memopt::runtime {

// The default CPU generator's state (dropout on the CPU, and memopt's own dropout
// kernel's key, draw from it). Kept in a host struct rather than get_state()'s tensor
// so that the counting allocator, which plays device memory on this testbed, never
// sees it -- as on a GPU, where a generator's seed and offset are host values too.
struct CpuRngState {
  at::mt19937 engine;
  std::optional<float> next_float_normal;
  std::optional<double> next_double_normal;
};
CpuRngState cpu_rng_state();
void set_cpu_rng_state(const CpuRngState& state);

// An accelerator's default generator, as the bytes its get_state() returns.
struct DeviceRngState {
  c10::Device device{c10::kCPU};
  std::vector<uint8_t> state_bytes;
};

// Everything a forward on `compute_device` may draw from. On the CPU testbed only
// the CPU generator; on a GPU the CPU generator too, since memopt's own dropout
// kernel takes its key from it (kernels/dropout.h).
struct RngState {
  CpuRngState cpu;
  std::optional<DeviceRngState> accelerator;
};
// Captures the generators of `compute_device` (and the CPU's). Needs no accelerator
// header: the generator comes from ATen's context, so the CPU build runs this too.
RngState rng_state(const c10::Device& compute_device);
void set_rng_state(const RngState& state);

// Swaps `state` in and puts what was there back on exit (a recomputation).
class RngStateScope {
 public:
  explicit RngStateScope(const RngState& state);
  ~RngStateScope();
  RngStateScope(const RngStateScope&) = delete;
  RngStateScope& operator=(const RngStateScope&) = delete;

 private:
  RngState saved_;
};

}  // namespace memopt::runtime

// rng_state.cpp: generator states through ATen's context (no accelerator header).
#include "runtime/rng_state.h"

#include <cstring>
#include <mutex>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>

namespace memopt::runtime {

CpuRngState cpu_rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(gen);
  return {impl->engine(), impl->next_float_normal_sample(), impl->next_double_normal_sample()};
}

void set_cpu_rng_state(const CpuRngState& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(gen);
  impl->set_engine(state.engine);
  impl->set_next_float_normal_sample(state.next_float_normal);
  impl->set_next_double_normal_sample(state.next_double_normal);
}

RngState rng_state(const c10::Device& compute_device) {
  RngState state{cpu_rng_state(), std::nullopt};
  if (compute_device.is_cpu()) return state;
  // Note [Accelerator RNG state]
  // A CUDA generator's get_state() is its Philox seed and offset (a few host bytes in
  // a CPU tensor); set_state() puts them back, so the next kernel launched draws the
  // same numbers. torch.utils.checkpoint does the same per device. A device without
  // an index means the current one, which is what ATen's kernels draw from.
  at::Generator gen = at::globalContext().defaultGenerator(compute_device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor bytes = gen.get_state();
  DeviceRngState device{compute_device, std::vector<uint8_t>(static_cast<size_t>(bytes.numel()))};
  std::memcpy(device.state_bytes.data(), bytes.data_ptr(), device.state_bytes.size());
  state.accelerator = std::move(device);
  return state;
}

void set_rng_state(const RngState& state) {
  set_cpu_rng_state(state.cpu);
  if (!state.accelerator) return;
  at::Generator gen = at::globalContext().defaultGenerator(state.accelerator->device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor bytes = at::empty({static_cast<int64_t>(state.accelerator->state_bytes.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), state.accelerator->state_bytes.data(), state.accelerator->state_bytes.size());
  gen.set_state(bytes);
}

RngStateScope::RngStateScope(const RngState& state) : saved_(rng_state(state.accelerator ? state.accelerator->device
                                                                                         : c10::Device(c10::kCPU))) {
  set_rng_state(state);
}
RngStateScope::~RngStateScope() { set_rng_state(saved_); }

}  // namespace memopt::runtime

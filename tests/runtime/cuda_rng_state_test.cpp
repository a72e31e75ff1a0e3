// cuda_rng_state_test.cpp: rng_state.h on a GPU -- the CUDA generator's Philox state,
// which ATen's dropout and sdpa's dropout draw from, captured and restored. Built
// only with MEMOPT_CUDA; skips itself without a visible device.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runtime/rng_state.h"

namespace memopt::runtime {
namespace {

#define MEMOPT_REQUIRE_GPU() \
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device visible"

TEST(CudaRngState, RestoringReplaysCudaDropout) {
  MEMOPT_REQUIRE_GPU();
  const c10::Device cuda(c10::kCUDA, 0);
  const at::Tensor x = at::ones({1 << 16}, at::TensorOptions(at::kFloat).device(cuda));
  const RngState state = rng_state(cuda);
  ASSERT_TRUE(state.accelerator.has_value());
  EXPECT_FALSE(state.accelerator->state_bytes.empty());
  const at::Tensor mask = at::dropout(x, 0.5, /*train=*/true);
  const at::Tensor next = at::dropout(x, 0.5, /*train=*/true);
  EXPECT_FALSE(at::equal(mask, next));
  {
    RngStateScope scope(state);
    EXPECT_TRUE(at::equal(at::dropout(x, 0.5, true), mask));
  }
  // The scope put the state after `next` back.
  const RngState after = rng_state(cuda);
  const at::Tensor third = at::dropout(x, 0.5, true);
  set_rng_state(after);
  EXPECT_TRUE(at::equal(at::dropout(x, 0.5, true), third));
  EXPECT_FALSE(at::equal(third, mask));
}

// Restoring only the CPU generator, as memopt did before, does not replay a CUDA
// mask: the device state is what matters there.
TEST(CudaRngState, TheCpuGeneratorAloneDoesNotReplayCudaDropout) {
  MEMOPT_REQUIRE_GPU();
  const c10::Device cuda(c10::kCUDA, 0);
  const at::Tensor x = at::ones({1 << 16}, at::TensorOptions(at::kFloat).device(cuda));
  const CpuRngState cpu = cpu_rng_state();
  const at::Tensor mask = at::dropout(x, 0.5, true);
  set_cpu_rng_state(cpu);
  EXPECT_FALSE(at::equal(at::dropout(x, 0.5, true), mask));
}

}  // namespace
}  // namespace memopt::runtime

// rng_state_test.cpp: capturing and restoring the generators a forward draws from
// (runtime/rng_state.h), on the CPU; tests/runtime/cuda_rng_state_test.cpp does the
// same on a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runtime/rng_state.h"

namespace memopt::runtime {
namespace {

TEST(RngState, OnTheCpuHoldsOnlyTheCpuGenerator) {
  EXPECT_FALSE(rng_state(c10::Device(c10::kCPU)).accelerator.has_value());
}

// ATen's dropout and normal sampling (which caches a second Gaussian) both replay.
TEST(RngState, RestoringReplaysDropoutAndGaussianDraws) {
  const at::Tensor x = at::ones({4096});
  at::randn({1});  // leaves a cached normal sample in the generator for the next draw
  const RngState state = rng_state(c10::Device(c10::kCPU));
  const at::Tensor mask = at::dropout(x, 0.5, /*train=*/true);
  const at::Tensor gauss = at::randn({7}, at::kDouble);
  const at::Tensor next_mask = at::dropout(x, 0.5, /*train=*/true);
  set_rng_state(state);
  EXPECT_TRUE(at::equal(at::dropout(x, 0.5, true), mask));
  EXPECT_TRUE(at::equal(at::randn({7}, at::kDouble), gauss));
  EXPECT_FALSE(at::equal(mask, next_mask));  // the generator does move on between draws
}

TEST(RngState, AScopeSwapsAStateInAndPutsTheCurrentOneBack) {
  const at::Tensor x = at::ones({4096});
  const RngState first = rng_state(c10::Device(c10::kCPU));
  const at::Tensor first_mask = at::dropout(x, 0.5, true);
  const RngState after_first = rng_state(c10::Device(c10::kCPU));
  {
    RngStateScope scope(first);
    EXPECT_TRUE(at::equal(at::dropout(x, 0.5, true), first_mask));
  }
  // As if the recomputation had never drawn: the next draw is the one after first_mask.
  const at::Tensor next = at::dropout(x, 0.5, true);
  set_rng_state(after_first);
  EXPECT_TRUE(at::equal(at::dropout(x, 0.5, true), next));
}

}  // namespace
}  // namespace memopt::runtime

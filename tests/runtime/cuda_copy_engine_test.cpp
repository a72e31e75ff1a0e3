// cuda_copy_engine_test.cpp: the CUDA copy engine on a real device. Built only with
// MEMOPT_CUDA; skips itself without a visible device (CI: compiles and links only).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runtime/copy_engine.h"
#include "runtime/host_arena.h"

namespace memopt::runtime {
namespace {

#define MEMOPT_REQUIRE_GPU() \
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device visible"

const at::TensorOptions kCuda = at::TensorOptions(at::kFloat).device(at::kCUDA);

TEST(CudaCopyEngine, RoundTripsAndTimesItsCopies) {
  MEMOPT_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  const at::Tensor a = at::randn({n}, kCuda);
  auto engine = make_copy_engine(a.device(), {0, 0, HostArena::bytes_for(std::vector<int64_t>{4 * n})});
  auto out = engine->offload(a);
  auto back = engine->prefetch(out);
  const at::Tensor b = back->take_device_tensor();
  EXPECT_TRUE(at::equal(a, b));  // ordered on the compute stream after the copy
  back->wait();
  EXPECT_GT(out->copy_ms(), 0.0);
  EXPECT_GT(back->copy_ms(), 0.0);
  engine->finish_step();
}

// Note [recordStream discipline] in cuda_copy_engine.cpp: the offloaded tensor is
// dropped at once and its block immediately reused by the compute stream, which
// overwrites it. Without recordStream the queued copy could read the new values.
TEST(CudaCopyEngine, AFreedOffloadIsNotReusedBeforeItsCopyHasReadIt) {
  MEMOPT_REQUIRE_GPU();
  const int64_t n = 16 << 20;
  auto engine = make_copy_engine(c10::Device(c10::kCUDA, 0), {0, 0, HostArena::bytes_for(std::vector<int64_t>{4 * n})});
  std::shared_ptr<Transfer> out;
  {
    at::Tensor a = at::full({n}, 1.0f, kCuda);
    out = engine->offload(a);
  }  // a is freed here, its copy likely still queued
  at::Tensor reuse = at::full({n}, 2.0f, kCuda);
  auto back = engine->prefetch(out);
  const at::Tensor b = back->take_device_tensor();
  EXPECT_TRUE(at::equal(b, at::full({n}, 1.0f, kCuda)));
  engine->finish_step();
}

TEST(CudaCopyEngine, RefusesTensorsOfAnotherDeviceAndTransfersOfAnotherEngine) {
  MEMOPT_REQUIRE_GPU();
  auto engine = make_copy_engine(c10::Device(c10::kCUDA, 0), {0, 0, 1 << 20});
  EXPECT_THROW(engine->offload(at::ones({4})), std::invalid_argument);
  auto cpu = make_copy_engine(c10::Device(c10::kCPU), {0, 0, 1 << 20});
  EXPECT_THROW(engine->prefetch(cpu->offload(at::ones({4}))), std::invalid_argument);
  cpu->finish_step();
}

}  // namespace
}  // namespace memopt::runtime

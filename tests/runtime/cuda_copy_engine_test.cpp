// cuda_copy_engine_test.cpp: the CUDA copy engine on a real device. Built only with
// MEMOPT_CUDA; skips itself without a visible device (CI: compiles and links only).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "runtime/copy_engine.h"
#include "runtime/cuda/cuda_copy_engine.h"
#include "runtime/host_arena.h"

namespace memopt::runtime::cuda {
namespace {

#define MEMOPT_REQUIRE_GPU() \
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device visible"

// Runs everywhere: without a device the engine refuses to start, naming the fix.
TEST(CudaCopyEngine, WithoutADeviceSaysSo) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is visible";
  try {
    make_cuda_copy_engine(0, {0, 0, 1 << 20});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device cuda:0 (0 visible)"), std::string::npos) << e.what();
  }
}

// A transfer of some other engine.
class ForeignTransfer final : public Transfer {
 public:
  void wait() const override {}
  bool done() const override { return true; }
  double copy_ms() const override { return 0; }
  at::Tensor take_device_tensor() override { return {}; }
};

const at::TensorOptions kCuda = at::TensorOptions(at::kFloat).device(at::kCUDA);

TEST(CudaCopyEngine, RoundTripsAndTimesItsCopies) {
  MEMOPT_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  const at::Tensor a = at::randn({n}, kCuda);
  auto engine = make_cuda_copy_engine(0, {0, 0, HostArena::bytes_for(std::vector<int64_t>{4 * n})});
  auto out = engine->offload(a);
  auto back = engine->prefetch(out);
  const at::Tensor b = back->take_device_tensor();
  EXPECT_TRUE(at::equal(a, b));  // ordered on the compute stream after the copy
  back->wait();
  EXPECT_GT(out->copy_ms(), 0.0);
  EXPECT_GT(back->copy_ms(), 0.0);
  engine->finish_step();
}

// Note [Copies hold their tensors] in cuda_copy_engine.cpp: the caller drops the
// offloaded tensor at once and the compute stream allocates and fills a block of the
// same size. The transfer still holds the source, so the block is not reused before
// the queued copy has read it.
TEST(CudaCopyEngine, AFreedOffloadIsNotReusedBeforeItsCopyHasReadIt) {
  MEMOPT_REQUIRE_GPU();
  const int64_t n = 16 << 20;
  auto engine = make_cuda_copy_engine(0, {0, 0, HostArena::bytes_for(std::vector<int64_t>{4 * n})});
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

// Once a copy has been waited for and its tensor dropped, the block is free for the
// compute stream at once, even with later copies still queued on the copy stream: no
// block waits behind the copy stream (which recordStream would make it do), so
// reserved memory follows the plan.
TEST(CudaCopyEngine, AWaitedOffloadFreesItsBlockAtOnceDespiteLaterCopies) {
  MEMOPT_REQUIRE_GPU();
  const int64_t n = 16 << 20;
  auto engine = make_cuda_copy_engine(0, {0, 0, HostArena::bytes_for(std::vector<int64_t>{4 * n, 4 * 4 * n})});
  at::Tensor a = at::full({n}, 1.0f, kCuda);
  const at::Tensor big = at::full({4 * n}, 3.0f, kCuda);
  auto out_a = engine->offload(a);
  auto out_big = engine->offload(big);  // queued behind a's copy on the same stream
  out_a->wait();
  const auto reserved = [] {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
        .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .current;
  };
  const int64_t before = reserved();
  a.reset();
  const at::Tensor reuse = at::full({n}, 2.0f, kCuda);  // takes a's block, not a new segment
  EXPECT_EQ(reserved(), before);
  engine->finish_step();
  EXPECT_TRUE(out_big->done());
}

TEST(CudaCopyEngine, RefusesTensorsOfAnotherDeviceAndTransfersOfAnotherEngine) {
  MEMOPT_REQUIRE_GPU();
  auto engine = make_cuda_copy_engine(0, {0, 0, 1 << 20});
  EXPECT_THROW(engine->offload(at::ones({4})), std::invalid_argument);
  EXPECT_THROW(engine->prefetch(std::make_shared<ForeignTransfer>()), std::invalid_argument);
}

}  // namespace
}  // namespace memopt::runtime::cuda

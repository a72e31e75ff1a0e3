// cuda_backend_test.cpp: the profiler's CUDA backend on a real device -- events,
// caching-allocator statistics, CUPTI attribution. Built only with MEMOPT_CUDA
// (label cuda, in CI's lean CUDA build); every test that needs a device skips itself
// without one, so on CI these tests prove that the backend compiles and links.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "measure/cuda/cuda_memory_meter.h"
#include "measure/cuda/cuda_timer.h"
#include "measure/cuda/cupti_tracer.h"
#include "measure/cuda/device.h"

namespace memopt::measure::cuda {
namespace {

#define MEMOPT_REQUIRE_GPU() \
  if (visible_device_count() == 0) GTEST_SKIP() << "no CUDA device visible"

// Runs everywhere: the device count agrees with ATen's, and is 0 (not an exception)
// on a machine without a driver, which the factories turn into a clear error.
TEST(CudaDevice, CountAgreesWithATenAndNeverThrows) {
  int count = -1;
  EXPECT_NO_THROW(count = visible_device_count());
  EXPECT_GE(count, 0);
  EXPECT_EQ(count > 0, at::hasCUDA());
  if (count == 0) {
    EXPECT_ANY_THROW(device_name(0));
  }
}

TEST(CudaBackend, TimerMeasuresDeviceWork) {
  MEMOPT_REQUIRE_GPU();
  auto timer = make_cuda_timer(0);
  const at::Tensor a = at::randn({2048, 2048}, at::kCUDA);
  timer->start();
  for (int k = 0; k < 4; ++k) (void)at::mm(a, a);
  const double ms = timer->stop_ms();
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60'000.0);
  EXPECT_FALSE(device_name(0).empty());
}

TEST(CudaBackend, MeterCountsAllocatedBytesAndResetsItsPeak) {
  MEMOPT_REQUIRE_GPU();
  auto meter = make_cuda_memory_meter(0);
  const int64_t before = meter->current_bytes();
  meter->reset_peak();
  {
    // 4 MiB: a multiple of the allocator's 512-byte rounding, so bytes are exact.
    at::Tensor t = at::empty({1 << 20}, at::TensorOptions(at::kFloat).device(at::kCUDA));
    EXPECT_EQ(meter->current_bytes() - before, 4 << 20);
  }
  EXPECT_EQ(meter->current_bytes(), before);
  EXPECT_EQ(meter->peak_bytes() - before, 4 << 20);
  meter->reset_peak();
  EXPECT_EQ(meter->peak_bytes(), meter->current_bytes());
}

// Requested bytes, to the byte: 1000 bytes are 1000, where the allocated-bytes
// statistic would count the 1024-byte block (512-byte rounding). And the device can
// still give something.
TEST(CudaBackend, MeterCountsRequestedBytesNotRoundedBlocks) {
  MEMOPT_REQUIRE_GPU();
  auto meter = make_cuda_memory_meter(0);
  const int64_t before = meter->current_bytes();
  at::Tensor t = at::empty({1000}, at::TensorOptions(at::kByte).device(at::kCUDA));
  EXPECT_EQ(meter->current_bytes() - before, 1000);
  EXPECT_GT(meter->available_bytes(), 0);
  EXPECT_GE(meter->reserved_bytes(), meter->current_bytes());
}

// Note [Ranges on every thread]: a CUDA backward runs on autograd's device thread,
// yet its kernels land in the range the calling thread opened around backward().
TEST(CudaBackend, CuptiAttributesBackwardKernelsRunOnAutogradsThread) {
  MEMOPT_REQUIRE_GPU();
  auto tracer = make_cupti_tracer();
  const at::Tensor w = at::randn({512, 512}, at::TensorOptions(at::kFloat).device(at::kCUDA)).requires_grad_(true);
  const at::Tensor y = at::mm(w, w).sum();
  {
    StageRange r(tracer.get(), "bwd", "mm");
    y.backward();
    (void)w.grad().sum().item<float>();  // the backward's work has finished
  }
  const TraceReport report = tracer->collect();
  ASSERT_EQ(report.ranges.size(), 1u);
  EXPECT_GE(report.ranges[0].num_kernels, 2);  // the two products of mm's backward at least
  EXPECT_EQ(report.num_lost_records, 0);
}

TEST(CudaBackend, CuptiAttributesKernelsAndCopiesToTheirStages) {
  MEMOPT_REQUIRE_GPU();
  auto tracer = make_cupti_tracer();
  EXPECT_THROW(make_cupti_tracer(), std::logic_error);  // one per process
  const at::Tensor a = at::randn({512, 512}, at::kCUDA);
  {
    StageRange r(tracer.get(), "fwd_keep", "mm");
    (void)at::mm(a, a);
  }
  {
    StageRange r(tracer.get(), "offload", "a");
    (void)a.to(at::kCPU);  // synchronous: the device work has finished
  }
  const TraceReport report = tracer->collect();
  ASSERT_EQ(report.ranges.size(), 2u);
  EXPECT_EQ(report.ranges[0].label, "memopt/fwd_keep/mm");
  EXPECT_GE(report.ranges[0].num_kernels, 1);
  EXPECT_GT(report.ranges[0].kernel_busy_ms, 0.0);
  EXPECT_EQ(report.ranges[1].d2h_bytes, 512 * 512 * 4);
}

}  // namespace
}  // namespace memopt::measure::cuda

// backend_test.cpp: the profiler's backend factories as every build sees them: the
// CPU backend works; the CUDA backend either works (a CUDA build with a device) or
// fails with the error naming the fix (no CUDA build, or no device visible).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "measure/backend.h"
#include "measure/cpu_allocator.h"

namespace memopt::measure {
namespace {

TEST(Backend, ParsesDeviceWordsAndNamesTheChoicesOtherwise) {
  EXPECT_EQ(parse_backend("cpu"), Backend::Cpu);
  EXPECT_EQ(parse_backend("cuda"), Backend::Cuda);
  EXPECT_STREQ(backend_word(Backend::Cuda), "cuda");
  try {
    parse_backend("gpu");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use cpu or cuda"), std::string::npos) << e.what();
  }
}

TEST(Backend, CpuFactoriesGiveTheCountingMeterAWallClockAndARangeOnlyTracer) {
  auto meter = make_memory_meter(Backend::Cpu);
  auto timer = make_timer(Backend::Cpu);
  auto tracer = make_stage_tracer(Backend::Cpu);
  counting_cpu_allocator();  // installed before the tensor below
  const int64_t before = meter->current_bytes();
  timer->start();
  at::Tensor t = at::empty({1 << 18}, at::kFloat);  // 1 MiB through the counting allocator
  EXPECT_GE(timer->stop_ms(), 0.0);
  EXPECT_EQ(meter->current_bytes() - before, 1 << 20);
  tracer->begin("fwd_keep", "s0");
  tracer->end();
  const TraceReport r = tracer->collect();
  ASSERT_EQ(r.ranges.size(), 1u);
  EXPECT_EQ(r.ranges[0].num_kernels, 0);
}

TEST(Backend, CudaEitherRunsOrSaysWhyNot) {
  if (!cuda_backend_built()) {
    try {
      make_timer(Backend::Cuda);
      FAIL() << "a CPU-only build made a CUDA timer";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("built without the CUDA backend"), std::string::npos) << e.what();
    }
    return;
  }
  if (!at::hasCUDA()) {
    try {
      require_backend(Backend::Cuda);
      FAIL() << "no device, yet the CUDA backend was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device is visible"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_NO_THROW(require_backend(Backend::Cuda));
}

}  // namespace
}  // namespace memopt::measure

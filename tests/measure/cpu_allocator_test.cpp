// cpu_allocator_test.cpp: the counting CPU allocator sees tensors come and go, and
// its peak resets.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "measure/cpu_allocator.h"

namespace memopt::measure {
namespace {

TEST(CountingCpuAllocator, CountsLiveTensorsAndPeak) {
  CpuMemoryMeter meter;
  const int64_t base = meter.current_bytes();
  meter.reset_peak();
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(meter.current_bytes() - base, 4000);
    {
      at::Tensor b = at::empty({10, 10}, at::kDouble);
      EXPECT_EQ(meter.current_bytes() - base, 4800);
    }
    EXPECT_EQ(meter.current_bytes() - base, 4000);
    at::Tensor view = a.narrow(0, 10, 100);  // views allocate nothing
    EXPECT_EQ(meter.current_bytes() - base, 4000);
  }
  EXPECT_EQ(meter.current_bytes(), base);
  EXPECT_EQ(meter.peak_bytes() - base, 4800);
  meter.reset_peak();
  EXPECT_EQ(meter.peak_bytes(), base);
}

TEST(CountingCpuAllocator, CountsIntraOpThreadsAndOps) {
  CpuMemoryMeter meter;
  const int64_t base = meter.current_bytes();
  at::Tensor x = at::randn({256, 256});
  at::Tensor y = at::matmul(x, x);
  EXPECT_EQ(meter.current_bytes() - base, 2 * 256 * 256 * 4);
}

}  // namespace
}  // namespace memopt::measure

// cpu_allocator_test.cpp: the counting CPU allocator sees tensors come and go, its
// peaks reset, and it caches freed blocks (allocated vs reserved bytes) so that a
// repeated computation reaches the system only the first time.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>

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

TEST(CachingCpuAllocator, ReservedIsTheRoundedBlocksHeldAndTheCacheServesTheSameSizeClass) {
  CountingCpuAllocator& a = counting_cpu_allocator();
  a.empty_cache();
  const int64_t allocated0 = a.current_bytes(), reserved0 = a.reserved_bytes();
  const int64_t system0 = a.num_system_allocations();
  void* first = nullptr;
  {
    at::Tensor t = at::empty({1000}, at::kFloat);  // 4000 bytes: one 4096-byte block
    first = t.data_ptr();
    EXPECT_EQ(a.current_bytes() - allocated0, 4000);
    EXPECT_EQ(a.reserved_bytes() - reserved0, 4096);
    EXPECT_EQ(a.num_system_allocations() - system0, 1);
  }
  // Freed: no longer allocated, still reserved (cached).
  EXPECT_EQ(a.current_bytes(), allocated0);
  EXPECT_EQ(a.reserved_bytes() - reserved0, 4096);
  {
    at::Tensor t = at::empty({1010}, at::kFloat);  // 4040 bytes: the same size class
    EXPECT_EQ(t.data_ptr(), first);
    EXPECT_EQ(a.current_bytes() - allocated0, 4040);  // what the tensor asked for, to the byte
    EXPECT_EQ(a.num_system_allocations() - system0, 1);
    at::Tensor other = at::empty({2000}, at::kFloat);  // another class: a new block
    EXPECT_EQ(a.num_system_allocations() - system0, 2);
    EXPECT_EQ(a.reserved_bytes() - reserved0, 4096 + 8192);
  }
  a.empty_cache();
  EXPECT_EQ(a.reserved_bytes(), reserved0);
  EXPECT_EQ(a.current_bytes(), allocated0);
}

TEST(CachingCpuAllocator, ARepeatedComputationReachesTheSystemOnlyOnce) {
  CountingCpuAllocator& a = counting_cpu_allocator();
  const at::Tensor w = at::randn({256, 256}).requires_grad_(true);
  const at::Tensor x = at::randn({64, 256});
  auto step = [&] {
    at::Tensor y = at::gelu(at::matmul(x, w)).sum();
    y.backward();
    w.mutable_grad().reset();
  };
  step();  // fills the cache
  const int64_t system_before = a.num_system_allocations(), reserved_before = a.reserved_bytes();
  const int64_t allocations_before = a.num_allocations();
  for (int k = 0; k < 3; ++k) step();
  EXPECT_GT(a.num_allocations(), allocations_before);  // the steps did allocate...
  EXPECT_EQ(a.num_system_allocations(), system_before);  // ...all of it from the cache
  EXPECT_EQ(a.reserved_bytes(), reserved_before);
  // A peak reset starts both peaks at the current values.
  a.reset_peak();
  EXPECT_EQ(a.peak_bytes(), a.current_bytes());
  EXPECT_EQ(a.peak_reserved_bytes(), a.reserved_bytes());
}

}  // namespace
}  // namespace memopt::measure

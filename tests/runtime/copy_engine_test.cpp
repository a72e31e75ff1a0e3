// copy_engine_test.cpp: the host pool's bookkeeping (HostArena, shared by the CPU and
// CUDA engines), the CPU engine through the factory -- its emulated link's rate and
// when it lets go of device memory -- and the factory's errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <thread>

#include "measure/backend.h"
#include "measure/cpu_allocator.h"
#include "runtime/copy_engine.h"
#include "runtime/host_arena.h"

namespace memopt::runtime {
namespace {

TEST(HostArena, HandsOutAlignedDisjointRangesInOrderAndRecyclesThem) {
  HostArena arena(1000);
  EXPECT_EQ(arena.take(1), 0);
  EXPECT_EQ(arena.take(64), 64);   // the 1-byte range took a whole 64-byte slot
  EXPECT_EQ(arena.take(65), 128);  // 65 rounds up to 128
  EXPECT_EQ(arena.take(0), 256);   // an empty tensor takes nothing
  EXPECT_EQ(arena.used_bytes(), 256);
  arena.reset();
  EXPECT_EQ(arena.used_bytes(), 0);
  EXPECT_EQ(arena.take(10), 0);
  EXPECT_EQ(arena.high_water_bytes(), 256);
}

TEST(HostArena, ExhaustionNamesTheSizesAndTheFix) {
  HostArena arena(128);
  arena.take(100);
  try {
    arena.take(1);
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("128 bytes is exhausted (needs 192)"), std::string::npos) << m;
    EXPECT_NE(m.find("size it from the schedule"), std::string::npos) << m;
  }
  EXPECT_THROW(HostArena(-1), std::invalid_argument);
}

// bytes_for is what callers size the pool with: exactly enough, never too little,
// for any sequence of sizes (brute force: take them all from a pool of that size).
TEST(HostArena, BytesForIsExactlyWhatTheTakesNeed) {
  const std::vector<std::vector<int64_t>> cases = {{}, {0}, {1}, {64}, {65, 1, 127}, {4096, 3, 3, 3}};
  for (const auto& sizes : cases) {
    const int64_t need = HostArena::bytes_for(sizes);
    HostArena exact(need);
    for (int64_t n : sizes) exact.take(n);
    EXPECT_EQ(exact.used_bytes(), need);
    if (need > 0) {
      HostArena short_by_one(need - 1);
      EXPECT_THROW(for (int64_t n : sizes) short_by_one.take(n), std::runtime_error);
    }
  }
}

TEST(CopyEngineFactory, CpuEngineRoundTripsThroughTheHostPool) {
  const at::Tensor a = at::arange(1000, at::kFloat), b = at::arange(77, at::kInt);
  auto engine = make_copy_engine(c10::Device(c10::kCPU), {0, 0, HostArena::bytes_for(std::vector<int64_t>{4000, 308})});
  EXPECT_EQ(engine->host_pool_bytes(), 4032 + 320);
  auto out_a = engine->offload(a);
  auto out_b = engine->offload(b);
  auto back_a = engine->prefetch(out_a);
  auto back_b = engine->prefetch(out_b);
  EXPECT_TRUE(at::equal(back_a->take_device_tensor(), a));
  EXPECT_TRUE(at::equal(back_b->take_device_tensor(), b));
  EXPECT_TRUE(out_a->done());
  engine->finish_step();
  // The pool was recycled: a second step fits again.
  auto again = engine->prefetch(engine->offload(a));
  EXPECT_TRUE(at::equal(again->take_device_tensor(), a));
  engine->finish_step();
}

// A capped link can never beat its cap: the engine sleeps until bytes / rate has
// passed since the copy started, so achieved <= requested holds exactly (copy_ms is
// measured over that same interval). From below, only a stalled machine could make a
// transfer take twice its time, hence the loose lower bound; the rates stay far below
// memcpy's (at most 8 MB in 40 ms) so that a loaded machine's copy still fits in them.
TEST(CpuCopyEngine, ACappedTransferRunsAtItsRate) {
  for (const double rate : {1e6, 20e6, 200e6}) {
    const auto num_bytes = static_cast<int64_t>(rate * 0.04) / 64 * 64;
    const at::Tensor t = at::ones({num_bytes / 4}, at::kFloat);
    auto engine = make_copy_engine(c10::Device(c10::kCPU), {rate, rate, HostArena::bytes_for(std::vector<int64_t>{num_bytes})});
    auto out = engine->offload(t);
    auto back = engine->prefetch(out);
    EXPECT_TRUE(at::equal(back->take_device_tensor(), t));
    engine->finish_step();
    for (const auto& transfer : {out, back}) {
      const double achieved = static_cast<double>(num_bytes) / (transfer->copy_ms() / 1e3);
      EXPECT_LE(achieved, rate) << "requested " << rate;
      EXPECT_GE(achieved, 0.5 * rate) << "requested " << rate;
    }
  }
}

// The device copy stays allocated until the emulated transfer ends, as on a GPU the
// source of a copy in flight cannot be reused: memcpy finishing early frees nothing.
TEST(CpuCopyEngine, AnOffloadFreesItsDeviceCopyWhenTheEmulatedTransferEnds) {
  measure::CpuMemoryMeter meter;
  const int64_t num_bytes = 1 << 20;
  auto engine = make_copy_engine(c10::Device(c10::kCPU), {num_bytes / 2.0, num_bytes / 2.0,
                                                           HostArena::bytes_for(std::vector<int64_t>{num_bytes})});
  const int64_t before = meter.current_bytes();
  std::shared_ptr<Transfer> out;
  {
    at::Tensor t = at::ones({num_bytes / 4}, at::kFloat);
    out = engine->offload(t);
  }  // the caller let go; the transfer holds the device copy
  // memcpy of 1 MiB takes well under a millisecond; the emulated link takes 2 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(out->done());
  EXPECT_EQ(meter.current_bytes() - before, num_bytes);
  out->wait();
  EXPECT_EQ(meter.current_bytes(), before);
  engine->finish_step();
}

// A tensor with no memory of its own is refused on the caller's thread, never read on
// the link's (where an error could reach no caller).
TEST(CpuCopyEngine, AnOffloadOfATensorWithNoMemoryIsRefusedAtIssue) {
  CopyEngineOptions options;
  options.host_pool_bytes = 1 << 20;
  CpuCopyEngine engine(options);
  const at::Tensor meta = at::empty({256}, at::TensorOptions().device(at::kMeta));
  EXPECT_THROW(engine.offload(meta), std::invalid_argument);
  const at::Tensor real = at::ones({256});
  const auto t = engine.offload(real);
  t->wait();
  engine.finish_step();
}

TEST(CopyEngineFactory, CudaWithoutTheBackendOrADeviceSaysSo) {
  if (measure::cuda_backend_built() && at::hasCUDA()) GTEST_SKIP() << "a CUDA device is visible";
  try {
    make_copy_engine(c10::Device(c10::kCUDA, 0), {});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    const bool names_fix = m.find("cuda` preset") != std::string::npos || m.find("no CUDA device") != std::string::npos;
    EXPECT_TRUE(names_fix) << m;
  }
}

}  // namespace
}  // namespace memopt::runtime

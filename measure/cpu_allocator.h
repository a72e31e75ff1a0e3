// cpu_allocator.h: the CPU testbed's device allocator -- a c10 CPU allocator that
// counts the bytes of live tensors, so that activation sizes are measured rather
// than guessed from shapes, and caches freed blocks the way a GPU's caching
// allocator does -- and the MemoryMeter that reads it.
#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Allocator.h>

#include "measure/memory_meter.h"

namespace memopt::measure {

// Note [A caching testbed allocator]
// c10's default CPU allocator returns every block to the C library, which hands
// large ones back to the kernel; the next step faults the same pages in again
// (about 1,600 faults in a store-all step of the tiny GPT-2). A GPU's caching
// allocator pays none of that, so on the plain CPU allocator step time grew with
// memory footprint in a way no GPU shows. This allocator keeps freed blocks in a
// cache keyed by size class (the request rounded up to kBlockRoundBytes) and hands
// one back for the next request of that class, as CUDA's caching allocator reuses
// a freed block for a request of its rounded size: from the second step of a
// repeated schedule on, no allocation reaches the system.
// Allocated bytes (current_bytes, peak_bytes) are what tensors asked for, to the
// byte -- on CUDA that is the caching allocator's requested_bytes statistic, not
// allocated_bytes, which counts whole blocks (the request rounded up, plus any unsplit
// remainder of a large block, which depends on the cache's state); plans and the
// simulator count requested bytes. Reserved bytes are the rounded sizes of every block
// the allocator holds, in use or cached: what the system has given it.
// Not modelled: CUDA splits large segments and merges neighbours, so its reserved
// bytes can be below the sum of distinct size classes seen; here a class's blocks
// serve only that class. empty_cache() returns the cache to the system.
//
// Wraps the CPU allocator that was current when it was installed. Thread-safe:
// intra-op worker threads and the copy engine's threads allocate too.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  static constexpr int64_t kBlockRoundBytes = 512;  // CUDA's smallest size class

  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t num_bytes) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  // Every DataPtr this allocator hands out is freed by this function with the data
  // pointer as context, so raw_allocate/raw_deallocate work (Note [Context is the
  // data pointer] in cpu_allocator.cpp).
  c10::DeleterFnPtr raw_deleter() const override;

  int64_t current_bytes() const { return current_bytes_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  int64_t reserved_bytes() const { return reserved_bytes_.load(std::memory_order_relaxed); }
  int64_t peak_reserved_bytes() const { return peak_reserved_bytes_.load(std::memory_order_relaxed); }
  void reset_peak() {
    peak_bytes_.store(current_bytes(), std::memory_order_relaxed);
    peak_reserved_bytes_.store(reserved_bytes(), std::memory_order_relaxed);
  }
  int64_t num_allocations() const { return num_allocations_.load(std::memory_order_relaxed); }
  // Allocations that the cache could not serve and the system had to.
  int64_t num_system_allocations() const { return num_system_allocations_.load(std::memory_order_relaxed); }
  // Returns every cached block to the system; blocks in use stay.
  void empty_cache();
  // Note [Device memory limit]: the CPU testbed plays a device of fixed capacity.
  // With a limit, an allocation that would take current_bytes() above it fails the
  // way a full GPU does (c10::OutOfMemoryError), so out-of-memory handling is
  // tested without a GPU. The limit is on allocated bytes: a GPU's allocator that
  // runs short frees its cache and retries before it fails, and this one's cache
  // never stands between a plan and the limit. 0 (the default): no limit.
  void set_limit_bytes(int64_t limit) { limit_bytes_.store(limit, std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_bytes_.load(std::memory_order_relaxed); }

 private:
  static void release(void* context);
  static int64_t block_bytes(int64_t num_bytes);

  c10::Allocator* base_;
  std::atomic<int64_t> current_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int64_t> reserved_bytes_{0};
  std::atomic<int64_t> peak_reserved_bytes_{0};
  std::atomic<int64_t> num_allocations_{0};
  std::atomic<int64_t> num_system_allocations_{0};
  std::atomic<int64_t> limit_bytes_{0};
};

// The process's counting allocator, installed with c10::SetCPUAllocator on the first
// call. It is never uninstalled or destroyed: c10 keeps a raw pointer to it and every
// tensor it handed out calls back into it when freed, whenever that happens. Tensors
// allocated before the first call are not counted (nor are their frees).
CountingCpuAllocator& counting_cpu_allocator();

class CpuMemoryMeter final : public MemoryMeter {
 public:
  CpuMemoryMeter() : allocator_(counting_cpu_allocator()) {}
  int64_t current_bytes() const override { return allocator_.current_bytes(); }
  int64_t peak_bytes() const override { return allocator_.peak_bytes(); }
  void reset_peak() override { allocator_.reset_peak(); }
  int64_t reserved_bytes() const override { return allocator_.reserved_bytes(); }
  void release_cached() override { allocator_.empty_cache(); }
  int64_t peak_reserved_bytes() const override { return allocator_.peak_reserved_bytes(); }
  int64_t available_bytes() const override {
    const int64_t limit = allocator_.limit_bytes();
    return limit > 0 ? limit - allocator_.current_bytes() : -1;
  }

 private:
  CountingCpuAllocator& allocator_;
};

}  // namespace memopt::measure

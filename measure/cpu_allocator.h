// cpu_allocator.h: a c10 CPU allocator that counts the bytes of live tensors, so that
// activation sizes are measured rather than guessed from shapes, and the MemoryMeter
// that reads it.
#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Allocator.h>

#include "measure/memory_meter.h"

namespace memopt::measure {

// Wraps the CPU allocator that was current when it was installed and counts what
// tensors ask for (c10's default CPU allocator hands out exactly that, 64-byte
// aligned, with no cache, so requested bytes are the bytes in use). Thread-safe:
// intra-op worker threads allocate too.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t num_bytes) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  // Every DataPtr this allocator hands out is freed by this function with the data
  // pointer as context, so raw_allocate/raw_deallocate work (Note [Context is the
  // data pointer] in cpu_allocator.cpp).
  c10::DeleterFnPtr raw_deleter() const override;

  int64_t current_bytes() const { return current_bytes_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_bytes_.store(current_bytes(), std::memory_order_relaxed); }
  int64_t num_allocations() const { return num_allocations_.load(std::memory_order_relaxed); }
  // Note [Device memory limit]: the CPU testbed plays a device of fixed capacity.
  // With a limit, an allocation that would take current_bytes() above it fails the
  // way a full GPU does (c10::OutOfMemoryError), so out-of-memory handling is
  // tested without a GPU. 0 (the default): no limit.
  void set_limit_bytes(int64_t limit) { limit_bytes_.store(limit, std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_bytes_.load(std::memory_order_relaxed); }

 private:
  static void release(void* context);

  c10::Allocator* base_;
  std::atomic<int64_t> current_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int64_t> num_allocations_{0};
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
  int64_t available_bytes() const override {
    const int64_t limit = allocator_.limit_bytes();
    return limit > 0 ? limit - allocator_.current_bytes() : -1;
  }

 private:
  CountingCpuAllocator& allocator_;
};

}  // namespace memopt::measure

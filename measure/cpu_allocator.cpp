// cpu_allocator.cpp: the counting CPU allocator and its one-time installation.
#include "measure/cpu_allocator.h"

#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace memopt::measure {
namespace {

// Note [Context is the data pointer]
// Some ATen kernels (gelu's, for one) take scratch memory through
// Allocator::raw_allocate, which insists that a DataPtr's context is its data
// pointer and frees it later through raw_deleter(). So the counted DataPtr carries
// the data pointer as its context, and what it must free and uncount is looked up
// in a table keyed by that pointer.
struct Counted {
  c10::DataPtr inner;  // the base allocator's own DataPtr: destroying it frees the memory
  int64_t num_bytes;
};

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<void*, Counted>& table() {
  static auto* t = new std::unordered_map<void*, Counted>();  // never destroyed: see counting_cpu_allocator()
  return *t;
}

}  // namespace

c10::DataPtr CountingCpuAllocator::allocate(size_t num_bytes) {
  // Checked before allocating; two threads racing past the limit together may overshoot
  // it by one allocation each, which a capacity emulation can afford.
  if (const int64_t limit = limit_bytes(); limit > 0) {
    const int64_t in_use = current_bytes();
    TORCH_CHECK_WITH(OutOfMemoryError, in_use + static_cast<int64_t>(num_bytes) <= limit,
                     "CPU testbed device memory: cannot allocate ", num_bytes, " bytes with ", in_use,
                     " in use of the limit of ", limit, " bytes");
  }
  c10::DataPtr inner = base_->allocate(num_bytes);
  void* data = inner.get();
  const c10::Device device = inner.device();
  const auto n = static_cast<int64_t>(num_bytes);
  if (data == nullptr) return {nullptr, nullptr, &CountingCpuAllocator::release, device};
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    table().emplace(data, Counted{std::move(inner), n});
  }
  const int64_t now = current_bytes_.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  num_allocations_.fetch_add(1, std::memory_order_relaxed);
  return {data, data, &CountingCpuAllocator::release, device};
}

void CountingCpuAllocator::release(void* data) {
  if (data == nullptr) return;
  c10::DataPtr inner;
  int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(data);
    if (it == table().end()) return;
    inner = std::move(it->second.inner);
    n = it->second.num_bytes;
    table().erase(it);
  }
  counting_cpu_allocator().current_bytes_.fetch_sub(n, std::memory_order_relaxed);
  // ~inner hands the memory back to the base allocator, outside the lock.
}

c10::DeleterFnPtr CountingCpuAllocator::raw_deleter() const { return &CountingCpuAllocator::release; }

void CountingCpuAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  base_->copy_data(dest, src, count);
}

CountingCpuAllocator& counting_cpu_allocator() {
  static CountingCpuAllocator* const instance = [] {
    auto* a = new CountingCpuAllocator(c10::GetCPUAllocator());
    // Above the default's priority 0, so it wins; below the maximum, so a tool that
    // must replace it (a leak checker, say) still can.
    c10::SetCPUAllocator(a, /*priority=*/100);
    if (c10::GetCPUAllocator() != a)
      throw std::runtime_error("memopt: another CPU allocator with a higher priority is installed; "
                               "cannot count CPU memory");
    return a;
  }();
  return *instance;
}

}  // namespace memopt::measure

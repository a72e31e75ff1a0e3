// cpu_allocator.cpp: the counting, caching CPU allocator and its one-time installation.
#include "measure/cpu_allocator.h"

#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace memopt::measure {
namespace {

// Note [Context is the data pointer]
// Some ATen kernels (gelu's, for one) take scratch memory through
// Allocator::raw_allocate, which insists that a DataPtr's context is its data
// pointer and frees it later through raw_deleter(). So the counted DataPtr carries
// the data pointer as its context, and what it must uncount and cache is looked up
// in a table keyed by that pointer.
struct Counted {
  c10::DataPtr inner;  // the base allocator's own DataPtr: destroying it frees the memory
  int64_t num_bytes;   // requested
  int64_t block_bytes; // its size class (Note [A caching testbed allocator])
};

// Everything below is guarded by state_mutex(); the counters are atomics so that
// meters read them without the lock.
std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}
// Never destroyed: see counting_cpu_allocator().
std::unordered_map<void*, Counted>& in_use() {
  static auto* t = new std::unordered_map<void*, Counted>();
  return *t;
}
std::unordered_map<int64_t, std::vector<c10::DataPtr>>& cached() {
  static auto* t = new std::unordered_map<int64_t, std::vector<c10::DataPtr>>();
  return *t;
}

void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

int64_t CountingCpuAllocator::block_bytes(int64_t num_bytes) {
  return (num_bytes + kBlockRoundBytes - 1) / kBlockRoundBytes * kBlockRoundBytes;
}

c10::DataPtr CountingCpuAllocator::allocate(size_t num_bytes) {
  // Checked before allocating; two threads racing past the limit together may overshoot
  // it by one allocation each, which a capacity emulation can afford.
  if (const int64_t limit = limit_bytes(); limit > 0) {
    const int64_t in_use_bytes = current_bytes();
    TORCH_CHECK_WITH(OutOfMemoryError, in_use_bytes + static_cast<int64_t>(num_bytes) <= limit,
                     "CPU testbed device memory: cannot allocate ", num_bytes, " bytes with ", in_use_bytes,
                     " in use of the limit of ", limit, " bytes");
  }
  const auto n = static_cast<int64_t>(num_bytes);
  if (n == 0) {
    c10::DataPtr inner = base_->allocate(0);
    return {nullptr, nullptr, &CountingCpuAllocator::release, inner.device()};
  }
  const int64_t block = block_bytes(n);
  c10::DataPtr inner;
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    auto it = cached().find(block);
    if (it != cached().end() && !it->second.empty()) {
      inner = std::move(it->second.back());
      it->second.pop_back();
    }
  }
  if (!inner) {
    inner = base_->allocate(static_cast<size_t>(block));  // outside the lock: the system may be slow
    if (inner.get() == nullptr) return {nullptr, nullptr, &CountingCpuAllocator::release, inner.device()};
    num_system_allocations_.fetch_add(1, std::memory_order_relaxed);
    raise_peak(peak_reserved_bytes_, reserved_bytes_.fetch_add(block, std::memory_order_relaxed) + block);
  }
  void* data = inner.get();
  const c10::Device device = inner.device();
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    in_use().emplace(data, Counted{std::move(inner), n, block});
  }
  raise_peak(peak_bytes_, current_bytes_.fetch_add(n, std::memory_order_relaxed) + n);
  num_allocations_.fetch_add(1, std::memory_order_relaxed);
  return {data, data, &CountingCpuAllocator::release, device};
}

void CountingCpuAllocator::release(void* data) {
  if (data == nullptr) return;
  int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    auto it = in_use().find(data);
    if (it == in_use().end()) return;
    n = it->second.num_bytes;
    cached()[it->second.block_bytes].push_back(std::move(it->second.inner));
    in_use().erase(it);
  }
  counting_cpu_allocator().current_bytes_.fetch_sub(n, std::memory_order_relaxed);
}

void CountingCpuAllocator::empty_cache() {
  std::unordered_map<int64_t, std::vector<c10::DataPtr>> freed;
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    freed.swap(cached());
  }
  int64_t bytes = 0;
  for (const auto& [block, ptrs] : freed) bytes += block * static_cast<int64_t>(ptrs.size());
  reserved_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  // ~freed hands the memory back to the base allocator, outside the lock.
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

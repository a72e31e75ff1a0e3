// host_arena.h: the bookkeeping of a copy engine's host pool, apart from the memory
// itself, so that the CPU engine (malloc'd pool) and the CUDA engine (one pinned
// allocation, runtime/cuda/) share it and the CPU tests cover it. Offsets are handed
// out in step order and recycled all at once between steps: a step offloads each
// activation once and prefetches it before the step ends, so nothing outlives it.
// Plain C++: no LibTorch, no CUDA.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace memopt::runtime {

class HostArena {
 public:
  // 64: a cache line, and enough for any dtype and for vectorised copies.
  static constexpr int64_t kAlignment = 64;

  explicit HostArena(int64_t capacity_bytes) : capacity_(capacity_bytes) {
    if (capacity_bytes < 0) throw std::invalid_argument("host pool: negative capacity " + std::to_string(capacity_bytes));
  }
  // The offset of a fresh range of num_bytes; throws std::runtime_error naming the
  // sizes and the fix when the pool is exhausted.
  int64_t take(int64_t num_bytes) {
    if (num_bytes < 0) throw std::invalid_argument("host pool: negative size " + std::to_string(num_bytes));
    const int64_t aligned = (num_bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (used_ + aligned > capacity_)
      throw std::runtime_error("copy engine: the host pool of " + std::to_string(capacity_) +
                               " bytes is exhausted (needs " + std::to_string(used_ + aligned) +
                               "); size it from the schedule's offloaded bytes");
    const int64_t offset = used_;
    used_ += aligned;
    if (used_ > high_water_) high_water_ = used_;
    return offset;
  }
  void reset() { used_ = 0; }
  int64_t capacity_bytes() const { return capacity_; }
  int64_t used_bytes() const { return used_; }
  int64_t high_water_bytes() const { return high_water_; }  // most ever used in one step

  // What a pool must hold for these tensors, each aligned as take() aligns it.
  template <typename Sizes>
  static int64_t bytes_for(const Sizes& sizes) {
    int64_t total = 0;
    for (int64_t n : sizes) total += (n + kAlignment - 1) / kAlignment * kAlignment;
    return total;
  }

 private:
  int64_t capacity_ = 0;
  int64_t used_ = 0;
  int64_t high_water_ = 0;
};

}  // namespace memopt::runtime

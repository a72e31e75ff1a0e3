// cuda_memory_meter.cpp: reads c10::cuda::CUDACachingAllocator's device stats.
#include "measure/cuda/cuda_memory_meter.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace memopt::measure::cuda {
namespace {

constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex device) : device_(device) {}
  int64_t current_bytes() const override { return allocated().current; }
  int64_t peak_bytes() const override { return allocated().peak; }
  int64_t reserved_bytes() const override { return reserved().current; }
  void release_cached() override { c10::cuda::CUDACachingAllocator::emptyCache(); }
  int64_t peak_reserved_bytes() const override { return reserved().peak; }
  // Resets the allocated and reserved peaks (and the active one, which memopt does
  // not read).
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }

 private:
  c10::CachingAllocator::Stat allocated() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_).allocated_bytes[kAggregate];
  }
  c10::CachingAllocator::Stat reserved() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_).reserved_bytes[kAggregate];
  }
  c10::DeviceIndex device_;
};

}  // namespace

std::unique_ptr<MemoryMeter> make_cuda_memory_meter(int device_index) {
  return std::make_unique<CudaMemoryMeter>(static_cast<c10::DeviceIndex>(device_index));
}

}  // namespace memopt::measure::cuda

// cuda_memory_meter.cpp: reads c10::cuda::CUDACachingAllocator's device stats.
#include "measure/cuda/cuda_memory_meter.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace memopt::measure::cuda {
namespace {

constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex device) : device_(device) {}
  int64_t current_bytes() const override { return requested().current; }
  int64_t peak_bytes() const override { return requested().peak; }
  int64_t reserved_bytes() const override { return reserved().current; }
  void release_cached() override { c10::cuda::CUDACachingAllocator::emptyCache(); }
  int64_t peak_reserved_bytes() const override { return reserved().peak; }
  // What the driver has free plus the cache's blocks that no tensor occupies.
  int64_t available_bytes() const override {
    c10::cuda::CUDAGuard guard(device_);
    size_t free_bytes = 0, total_bytes = 0;
    C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    return static_cast<int64_t>(free_bytes) + stats.reserved_bytes[kAggregate].current -
           stats.allocated_bytes[kAggregate].current;
  }
  // Resets the requested and reserved peaks (and the others, which memopt does not
  // read).
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }

 private:
  c10::CachingAllocator::Stat requested() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_).requested_bytes[kAggregate];
  }
  c10::CachingAllocator::Stat reserved() const {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_).reserved_bytes[kAggregate];
  }
  c10::DeviceIndex device_;
};

}  // namespace

// Note [A meter before the first CUDA tensor]: the caching allocator has no devices
// until CUDA is initialised, which the first CUDA tensor does lazily; a meter made
// before it would find none ("Invalid device argument"). Making the meter initialises
// CUDA, as creating a tensor would.
std::unique_ptr<MemoryMeter> make_cuda_memory_meter(int device_index) {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  return std::make_unique<CudaMemoryMeter>(static_cast<c10::DeviceIndex>(device_index));
}

}  // namespace memopt::measure::cuda

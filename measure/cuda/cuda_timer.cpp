// cuda_timer.cpp: two timing events on the current stream.
#include "measure/cuda/cuda_timer.h"

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

namespace memopt::measure::cuda {
namespace {

class CudaTimer final : public Timer {
 public:
  explicit CudaTimer(c10::DeviceIndex device) : device_(device) {}
  void start() override { start_.record(c10::cuda::getCurrentCUDAStream(device_)); }
  double stop_ms() override {
    end_.record(c10::cuda::getCurrentCUDAStream(device_));
    end_.synchronize();
    return start_.elapsed_time(end_);
  }

 private:
  c10::DeviceIndex device_;
  c10::cuda::CUDAEvent start_{cudaEventDefault};  // the default flags disable timing
  c10::cuda::CUDAEvent end_{cudaEventDefault};
};

}  // namespace

std::unique_ptr<Timer> make_cuda_timer(int device_index) {
  return std::make_unique<CudaTimer>(static_cast<c10::DeviceIndex>(device_index));
}

}  // namespace memopt::measure::cuda

// device.cpp: c10's device count, which reports 0 rather than failing without a
// driver, and the device's marketing name for the profile.
#include "measure/cuda/device.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

namespace memopt::measure::cuda {

int visible_device_count() { return static_cast<int>(c10::cuda::device_count()); }

int current_device_index() { return static_cast<int>(c10::cuda::current_device()); }

std::string device_name(int device_index) {
  cudaDeviceProp prop{};
  C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
  return prop.name;
}

}  // namespace memopt::measure::cuda

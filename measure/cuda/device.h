// device.h: what the CUDA side knows about devices, for the backend factory.
#pragma once

#include <string>

namespace memopt::measure::cuda {

// Devices the CUDA runtime sees (0 without a driver or GPU; never throws).
int visible_device_count();
// The calling thread's current device (CUDA_VISIBLE_DEVICES and cudaSetDevice pick it).
int current_device_index();
// E.g. "NVIDIA H100 80GB HBM3"; throws when the device does not exist.
std::string device_name(int device_index);

}  // namespace memopt::measure::cuda

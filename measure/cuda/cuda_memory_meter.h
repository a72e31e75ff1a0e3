// cuda_memory_meter.h: the MemoryMeter on the CUDA caching allocator's statistics:
// requested bytes (what live tensors asked for, to the byte -- Note [A caching testbed
// allocator] in measure/cpu_allocator.h says why not allocated_bytes) for plans,
// reserved bytes (what the cache holds from the driver) beside them. reset_peak() resets the allocator's peak, so each measurement starts at
// the current bytes. Blind to cuBLAS/cuDNN workspaces outside the allocator, as
// the CPU counter is to oneDNN's scratch (Note [Stage byte accounting]).
#pragma once

#include <memory>

#include "measure/memory_meter.h"

namespace memopt::measure::cuda {

std::unique_ptr<MemoryMeter> make_cuda_memory_meter(int device_index);

}  // namespace memopt::measure::cuda

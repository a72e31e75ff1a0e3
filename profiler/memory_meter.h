// memory_meter.h: what the profiler and the executor ask of a device's allocator --
// the bytes its live tensors occupy now, and the most they occupied since the last
// reset. CPU: a counting c10 allocator (cpu_allocator.h); CUDA would read the caching
// allocator's allocated-bytes statistics (not reserved ones) the same way.
#pragma once

#include <cstdint>

namespace memopt::profiler {

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual int64_t current_bytes() const = 0;
  virtual int64_t peak_bytes() const = 0;  // since the last reset_peak()
  virtual void reset_peak() = 0;           // peak := current
};

}  // namespace memopt::profiler

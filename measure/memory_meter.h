// memory_meter.h: what the profiler and the executor ask of a device's allocator --
// the bytes its live tensors occupy now (allocated), the most they occupied since the
// last reset, and what the allocator holds from the system for them and its cache
// (reserved). Plans count allocated bytes; reserved is reported beside them. CPU: a
// counting, caching c10 allocator (cpu_allocator.h); CUDA: the caching allocator's
// allocated and reserved statistics.
#pragma once

#include <cstdint>

namespace memopt::measure {

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual int64_t current_bytes() const = 0;
  virtual int64_t peak_bytes() const = 0;  // since the last reset_peak()
  virtual void reset_peak() = 0;           // peak := current, for allocated and reserved
  // Allocated bytes plus the allocator's cache; -1 when the meter cannot tell.
  virtual int64_t reserved_bytes() const { return -1; }
  virtual int64_t peak_reserved_bytes() const { return -1; }  // since the last reset_peak()
  // What the device can still give, or -1 when the meter cannot tell. CPU: the
  // testbed's limit (Note [Device memory limit]) minus current_bytes(), -1 without a
  // limit; a GPU meter would ask its caching allocator and the driver.
  virtual int64_t available_bytes() const { return -1; }
  // Hands the allocator's cached blocks back to the system (CPU: the testbed
  // allocator's cache; CUDA: the caching allocator's empty_cache), so that a one-off
  // allocation does not stay reserved for good.
  virtual void release_cached() {}
};

}  // namespace memopt::measure

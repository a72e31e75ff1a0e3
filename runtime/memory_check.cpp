// memory_check.cpp: the device-memory probe and the step that leaves no trace when it fails.
#include "runtime/memory_check.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "solver/chain/schedule.h"
#include "solver/chain/units.h"

namespace memopt::runtime {
namespace {

using solver::format_bytes;

std::string bytes_text(int64_t b) { return format_bytes(b) + " (" + std::to_string(b) + " B)"; }

[[noreturn]] void throw_short(const measure::MemoryMeter& meter, const std::string& plan_source, const std::string& when,
                              int64_t activation_peak_bytes, int64_t state_bytes) {
  const int64_t needed = activation_peak_bytes + state_bytes;
  const int64_t available = meter.available_bytes();
  std::string what = plan_source + ": " + when + " needs " + bytes_text(needed) + " of device memory (activation peak " +
                     format_bytes(activation_peak_bytes) +
                     (state_bytes > 0 ? " + gradients and optimizer state " + format_bytes(state_bytes) : "") + ")";
  int64_t suggested = -1;
  if (available >= 0) {
    what += " but only " + bytes_text(available) + " is free: short by " + bytes_text(needed - available);
    suggested = available - state_bytes;
  } else {
    what += ", which the device could not allocate";
  }
  if (suggested > 0)
    what += "; solve for a budget of at most " + std::to_string(suggested) + " B (`memopt solve --budget " +
            std::to_string(suggested) + "`) and load that plan";
  else
    what += "; not even the training state fits: free device memory or use a smaller model or batch";
  throw InsufficientDeviceMemory(what, needed, available, suggested);
}

}  // namespace

void check_device_memory(measure::MemoryMeter& meter, int64_t activation_peak_bytes, int64_t state_bytes,
                         const std::string& plan_source) {
  try {
    at::Tensor probe = at::empty({activation_peak_bytes + state_bytes}, at::TensorOptions().dtype(at::kByte));
  } catch (const c10::Error&) {  // OutOfMemoryError, or the base allocator's own failure
    meter.release_cached();
    throw_short(meter, plan_source, "a training step of this plan", activation_peak_bytes, state_bytes);
  }
  meter.release_cached();
}

int64_t unallocated_state_bytes(const model::StagedModel& model, int optimizer_moments) {
  int64_t bytes = 0;
  for (const at::Tensor& p : model.parameters()) {
    const int64_t n = static_cast<int64_t>(p.nbytes());
    if (!p.grad().defined()) bytes += n;
    bytes += optimizer_moments * n;
  }
  return bytes;
}

StepResult run_step_or_restore(const model::StagedModel& model, const std::vector<solver::Op>& ops, const model::Batch& batch,
                               measure::MemoryMeter& meter, const ExecutorOptions& options,
                               const std::string& plan_source, measure::Timer* timer) {
  const RngState rng = rng_state(batch.input.device());
  const int64_t free_at_start = meter.available_bytes();
  const auto restore = [&] {
    set_rng_state(rng);  // the dropout masks drawn so far must be drawn again by the next step
    zero_grads_in_place(model);
  };
  try {
    return run_scheduled_step(model, ops, batch, meter, options, timer);
  } catch (const c10::OutOfMemoryError& e) {
    restore();
    // The plan's prediction was too low for this device (or the device is shared):
    // what was free at the start is the most a plan may use.
    std::string what = plan_source + ": the step ran out of device memory midway (" + e.what_without_backtrace() +
                       "); the model and optimizer are unchanged";
    if (free_at_start > 0)
      what += "; solve for a budget of at most " + std::to_string(free_at_start) + " B (`memopt solve --budget " +
              std::to_string(free_at_start) + "`) and load that plan";
    throw InsufficientDeviceMemory(what, -1, free_at_start, free_at_start > 0 ? free_at_start : -1);
  } catch (...) {
    restore();
    throw;
  }
}

}  // namespace memopt::runtime

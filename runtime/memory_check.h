// memory_check.h: before a plan is trusted, check that the device (on this CPU
// testbed: the counting allocator's limit, Note [Device memory limit]) can really
// hold what a step needs; and run a step so that running out of memory midway leaves
// the model, the optimizer and the RNG as they were, ready for a smaller plan.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "measure/memory_meter.h"
#include "model/staged_model.h"
#include "runtime/executor.h"
#include "runtime/train_step.h"

namespace memopt::runtime {

// The device cannot hold a step of this plan. The message says by how much and the
// budget to solve for; the numbers are here for callers that re-plan themselves.
struct InsufficientDeviceMemory : std::runtime_error {
  InsufficientDeviceMemory(const std::string& what, int64_t needed, int64_t available, int64_t suggested)
      : std::runtime_error(what), needed_bytes(needed), available_bytes(available), suggested_budget_bytes(suggested) {}
  int64_t needed_bytes;            // the plan's activation peak plus state not yet allocated
  int64_t available_bytes;         // what the device could still give (-1: unknown)
  int64_t suggested_budget_bytes;  // activation budget to solve for (-1: none fits)
};

// Allocates activation_peak_bytes + state_bytes on the device and frees them again:
// a real allocation, not arithmetic, so fragmentation and other users of the device
// count. `state_bytes` is what the step will allocate beyond activations for the first
// time (gradients, optimizer moments). Throws InsufficientDeviceMemory naming
// `plan_source` when the allocation fails, with what `meter` says is still free.
// The probe is handed back to the system (MemoryMeter::release_cached): a caching
// allocator would otherwise keep a block of that one size reserved for good.
void check_device_memory(measure::MemoryMeter& meter, int64_t activation_peak_bytes, int64_t state_bytes,
                         const std::string& plan_source);

// Bytes of the gradients not yet allocated plus `optimizer_moments` copies of every
// parameter (2 for AdamW before its first step, 0 after).
int64_t unallocated_state_bytes(const model::StagedModel& model, int optimizer_moments);

// run_scheduled_step, except that if it throws (out of memory above all) the generators
// (rng_state.h) are put back and the gradients zeroed before the exception leaves: parameters and
// optimizer state were never touched (the optimizer steps after a step succeeds), so
// the next step -- along a smaller plan -- trains exactly as if the failed one had
// never been tried. Out of memory comes out as InsufficientDeviceMemory.
StepResult run_step_or_restore(const model::StagedModel& model, const std::vector<solver::Op>& ops, const model::Batch& batch,
                               measure::MemoryMeter& meter, const ExecutorOptions& options,
                               const std::string& plan_source, measure::Timer* timer = nullptr);

}  // namespace memopt::runtime

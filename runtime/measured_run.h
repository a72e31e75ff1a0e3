// measured_run.h: rebuild the GPT-2 a profile describes and train a few steps along a
// schedule, measuring each step's activation peak and time -- what `memopt run` and
// `memopt tradeoff --run` share. MEASURED numbers, on this machine's CPU or GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stats.h"
#include "measure/backend.h"
#include "measure/trace.h"
#include "runtime/op_times.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/chain/simulate.h"

namespace memopt::runtime {

struct StageTimes;  // stage_timing.h

struct StepMeasurement {
  int step = 0;                      // 1-based among the schedule's steps, warm-up included
  bool warmup = false;               // a warm-up step: reported, never in the statistics
  double loss = 0;
  int64_t activation_peak_bytes = 0; // allocated bytes (what plans count)
  int64_t reserved_peak_bytes = -1;  // what the allocator held from the system at most, -1: unknown
  double time_ms = 0;
  bool checked = false;              // the gradient comparison below was made
  double max_abs_grad_diff = 0;      // |scheduled - plain autograd| over all gradients
  double max_abs_grad_ref = 0;       // largest |plain gradient|, for a relative figure
  double loss_diff = 0;
};

// Note [Measurement protocol]
// Step times on a shared 2-core machine move by tens of percent between processes and
// with the order schedules run in (the first pays for cold allocations), so every
// measured number in memopt comes from one protocol, in one process:
//  1. each schedule runs `warmup_steps` unmeasured steps, schedules taking turns, so
//     the caching allocator (Note [A caching testbed allocator]) holds every block
//     any of them needs and the CPU caches and branch predictors have seen them all;
//  2. then `steps` rounds, each running one step of every schedule in the same order
//     (A B C A B C ...), so that a slow spell of the machine lands on all of them;
//  3. each schedule's time is the median of its measured steps with the
//     interquartile range (common::Spread); its peak, the median of their peaks.
// Schedules are compared only within one such run, never across processes.
struct MeasureOptions {
  int warmup_steps = 2;  // per schedule, unmeasured
  int steps = 5;         // measured steps per schedule: one per round
  // Also run each warm-up step by plain autograd and compare gradients, with
  // deterministic algorithms on; at least one warm-up step then runs. The measured
  // steps run unchecked (Notes [Checked steps are deterministic] and [The warm-up
  // steps are the checked ones] in measured_run.cpp).
  bool check = false;
  double lr = 1e-4;      // AdamW
  // Progress, printing: the schedule's index in the list measured, and its step.
  std::function<void(int, const StepMeasurement&)> on_step;
  // After the measured rounds, one more step of each schedule with every op in its
  // range (NVTX, and CUPTI on CUDA): ScheduleMeasurement::trace. A step of its own,
  // since tracing costs time that the measured steps should not carry.
  bool trace = false;
  // Time every op of the measured steps on the wall clock and split each step by where
  // its ops ran (ScheduleMeasurement::op_times; Note [Where an op runs] in
  // solver/chain/op_context.h). CPU testbed only: a GPU's ops are timed by the trace.
  bool op_times = false;
  // Note [Stage times from the measured rounds]
  // Stage times re-measured in this process before the measured rounds (Note [Stage
  // times from this process]) still come from steps that alternate two schedules,
  // early in the process, while the steps they predict run later, each among every
  // schedule of the run; on a model whose tensors all fit in the CPU's caches, how
  // fast an op runs depends on what ran just before it. So, when this is set, every
  // round (the warm-up ones too) first runs one step of each schedule that times the
  // stages (stage_timing_schedules in stage_timing.h), every op timed, and after the
  // rounds the stage times from the measured rounds' timing steps are written here.
  // They are steps of their own: the measured steps run as they would without them,
  // untraced. CPU testbed only, like op_times.
  StageTimes* stage_times_in_rounds = nullptr;
};

// The warm-up steps each schedule runs: `warmup_steps`, and at least one with `check`
// (Note [The warm-up steps are the checked ones] in measured_run.cpp).
inline int warmup_rounds(const MeasureOptions& options) {
  return options.check && options.warmup_steps < 1 ? 1 : options.warmup_steps;
}

struct ScheduleMeasurement {
  std::vector<StepMeasurement> steps;  // warm-up steps first
  int64_t median_peak_bytes = 0;       // over the measured steps
  int64_t reserved_peak_bytes = -1;    // max over the measured steps
  common::Spread time_ms;              // over the measured steps
  std::optional<double> max_abs_grad_diff;  // over the steps, when checked
  std::optional<measure::TraceReport> trace;  // MeasureOptions::trace
  std::vector<OpTimeRow> op_times;            // MeasureOptions::op_times
};

// The model of a profile, built once (its "model" object: gpt2::gpt2_spec_from_json),
// with the compute threads the profile was measured with unless `threads` > 0, on
// the device `backend` names -- by default the profile's "device.kind" (a modeled
// profile's, and one without it, the CPU). Its memory meter and clock are that
// device's (measure/backend.h): on CUDA, requested bytes and CUDA events. Schedules
// with offload ops run through that device's copy engine on the chain's link
// (emulated on the CPU); without a link they are refused. With `device_memory_bytes` > 0
// the CPU plays a device of that capacity (Note [Device memory limit]): the model's
// parameters and batch count against it, and a plan that does not fit is refused
// before its first step.
class ProfiledModel {
 public:
  explicit ProfiledModel(const solver::Profile& profile, int threads = 0, int64_t device_memory_bytes = 0,
                         std::optional<measure::Backend> backend = std::nullopt);
  ~ProfiledModel();
  ProfiledModel(const ProfiledModel&) = delete;
  ProfiledModel& operator=(const ProfiledModel&) = delete;

  int num_stages() const;
  int threads() const;
  measure::Backend backend() const;
  // Throws std::invalid_argument when the schedule was not made for this model.
  void check_fits(const solver::Schedule& schedule, const std::string& schedule_source) const;
  // Note [Measurement protocol] over `schedules`, one result each, in order;
  // `sources[k]` names schedule k in errors. One AdamW per call, stepped after every
  // step. The schedules that copy share one copy engine on the chain's link (Note
  // [One copy engine per run] in measured_run.cpp).
  std::vector<ScheduleMeasurement> measure_interleaved(const solver::Chain& chain,
                                                       const std::vector<solver::Schedule>& schedules,
                                                       const MeasureOptions& options,
                                                       const std::vector<std::string>& sources);
  // Note [Stage times from this process]
  // Separate processes on one machine run the same stage tens of percent apart (CPU
  // frequency and placement, the allocator's and the caches' state), so a prediction
  // from times another process measured misses by that much, however well the
  // measured steps are interleaved. This re-times every stage in this process, on
  // this model, by the profile's own protocol (Note [Stage times from training steps]
  // in stage_timing.h), and writes the times into `chain`; its bytes stay the
  // profile's, which are exact. Only on the CPU testbed: a GPU's kernels are timed by
  // events in the profile, and their times do not move between processes like this.
  // Throws std::invalid_argument on another device.
  void retime_stages(solver::Chain& chain);

  // The protocol on one schedule.
  ScheduleMeasurement measure(const solver::Chain& chain, const solver::Schedule& schedule,
                              const MeasureOptions& options, const std::string& schedule_source = "schedule");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One line of `memopt run --summary-out`: which profile and schedule ran, and the
// peak and time predicted (`predicted`: the simulator's) and measured (the medians,
// the time's interquartile range and the reserved peak).
nlohmann::json run_summary_json(const std::string& profile_source, const std::string& schedule_source,
                                const solver::Schedule& schedule, const solver::SimResult& predicted,
                                const ScheduleMeasurement& measured);

}  // namespace memopt::runtime

// measured_run.h: rebuild the GPT-2 a profile describes and train a few steps along a
// schedule, measuring each step's activation peak and time -- what `memopt run` and
// `memopt tradeoff --run` share. MEASURED numbers, on this machine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "solver/profile_json.h"
#include "solver/schedule.h"
#include "solver/simulate.h"

namespace memopt::runtime {

struct StepMeasurement {
  int step = 0;                      // 1-based
  double loss = 0;
  int64_t activation_peak_bytes = 0;
  double time_ms = 0;
  bool checked = false;              // the gradient comparison below was made
  double max_abs_grad_diff = 0;      // |scheduled - plain autograd| over all gradients
  double max_abs_grad_ref = 0;       // largest |plain gradient|, for a relative figure
  double loss_diff = 0;
};

struct MeasureOptions {
  int steps = 3;
  bool check = false;   // also run each step by plain autograd and compare gradients
  double lr = 1e-4;     // AdamW
  std::function<void(const StepMeasurement&)> on_step;  // progress, printing
};

struct ScheduleMeasurement {
  std::vector<StepMeasurement> steps;
  // The first step pays for lazy initialisation: medians of steps 2.. (of the only
  // step when there is one).
  int64_t median_peak_bytes = 0;
  double median_time_ms = 0;
  std::optional<double> max_abs_grad_diff;  // over the steps, when checked
};

// The model of a profile, built once (its "model" object: gpt2::gpt2_spec_from_json),
// with the compute threads the profile was measured with unless `threads` > 0.
// Schedules with offload ops run through a CPU copy engine emulating the chain's
// link (Chain::link); without a link they are refused. With `device_memory_bytes` > 0
// the CPU plays a device of that capacity (Note [Device memory limit]): the model's
// parameters and batch count against it, and a plan that does not fit is refused
// before its first step.
class ProfiledModel {
 public:
  explicit ProfiledModel(const solver::Profile& profile, int threads = 0, int64_t device_memory_bytes = 0);
  ~ProfiledModel();
  ProfiledModel(const ProfiledModel&) = delete;
  ProfiledModel& operator=(const ProfiledModel&) = delete;

  int num_stages() const;
  int threads() const;
  // Throws std::invalid_argument when the schedule was not made for this model.
  void check_fits(const solver::Schedule& schedule, const std::string& schedule_source) const;
  // `schedule_source` names the schedule in errors. A fresh AdamW per call.
  ScheduleMeasurement measure(const solver::Chain& chain, const solver::Schedule& schedule,
                              const MeasureOptions& options, const std::string& schedule_source = "schedule");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One line of `memopt run --summary-out`: which profile and schedule ran, and the
// peak and time predicted (`predicted`: the simulator's) and measured (the medians).
nlohmann::json run_summary_json(const std::string& profile_source, const std::string& schedule_source,
                                const solver::Schedule& schedule, const solver::SimResult& predicted,
                                const ScheduleMeasurement& measured);

}  // namespace memopt::runtime

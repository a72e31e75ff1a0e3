// measured_run.cpp: the measured training steps behind `memopt run` and `memopt tradeoff --run`.
#include "runtime/measured_run.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/stats.h"
#include "measure/backend.h"
#include "measure/cpu_allocator.h"
#include "measure/wall_clock_tracer.h"
#include "model/device.h"
#include "model/factory.h"
#include "runtime/copy_engine.h"
#include "runtime/copy_plan.h"
#include "runtime/executor.h"
#include "runtime/memory_check.h"
#include "runtime/stage_timing.h"
#include "runtime/train_step.h"
#include "solver/chain/simulate.h"

namespace memopt::runtime {

struct ProfiledModel::Impl {
  measure::Backend backend;
  c10::Device device;
  model::StagedModel model;
  model::Batch batch;
  int threads;
  std::unique_ptr<measure::MemoryMeter> meter;
  std::unique_ptr<measure::Timer> timer;
  Impl(const solver::Profile& profile, int threads_flag, measure::Backend backend_)
      : Impl(profile, threads_flag, backend_, model::build_model(profile.model)) {}
  Impl(const solver::Profile& profile, int threads_flag, measure::Backend backend_, model::BuiltModel built)
      : backend(backend_),
        device(measure::backend_device(backend_)),
        model(std::move(built.staged)),
        batch(std::move(built.batch)),
        threads(threads_flag > 0 ? threads_flag : profile.device.value("threads", 1)) {
    // Built on the CPU with the profile's seed, then moved: the same weights and
    // batch on every device.
    if (!device.is_cpu()) model::move_to(model, batch, device);
    meter = measure::make_memory_meter(backend);
    timer = measure::make_timer(backend);
  }
};

namespace {

measure::Backend profile_backend(const solver::Profile& profile) {
  // A modeled profile (the roofline's) names a GPU it was never measured on: it runs
  // where it always did, on the CPU testbed.
  if (!profile.measured) return measure::Backend::Cpu;
  return profile.device.value("kind", std::string("cpu")) == "cuda" ? measure::Backend::Cuda : measure::Backend::Cpu;
}

}  // namespace

ProfiledModel::ProfiledModel(const solver::Profile& profile, int threads, int64_t device_memory_bytes,
                             std::optional<measure::Backend> backend_choice) {
  const measure::Backend backend = backend_choice.value_or(profile_backend(profile));
  measure::require_backend(backend);
  const std::string dtype = profile.model.value("dtype", std::string("float32"));
  if (dtype != "float32")
    throw std::invalid_argument("the profile's model is " + dtype +
                                "; memopt run trains float32 only (a modeled GPU profile cannot be run here)");
  if (device_memory_bytes > 0 && backend != measure::Backend::Cpu)
    throw std::invalid_argument("--device-memory: emulates a device's capacity on the CPU; on " +
                                std::string(measure::backend_word(backend)) + " the device's own memory counts");
  // Installed before the model is built, so that its parameters and the batch count
  // against the device like everything else.
  if (device_memory_bytes > 0) measure::counting_cpu_allocator();
  impl_ = std::make_unique<Impl>(profile, threads, backend);
  if (device_memory_bytes > 0) measure::counting_cpu_allocator().set_limit_bytes(device_memory_bytes);
}
ProfiledModel::~ProfiledModel() = default;

int ProfiledModel::num_stages() const { return impl_->model.num_stages(); }
int ProfiledModel::threads() const { return impl_->threads; }
measure::Backend ProfiledModel::backend() const { return impl_->backend; }

void ProfiledModel::check_fits(const solver::Schedule& schedule, const std::string& source) const {
  check_schedule_fits_model(schedule, impl_->model, source);
}

std::vector<ScheduleMeasurement> ProfiledModel::measure_interleaved(const solver::Chain& chain,
                                                                    const std::vector<solver::Schedule>& schedules,
                                                                    const MeasureOptions& options,
                                                                    const std::vector<std::string>& sources) {
  if (options.steps < 1) throw std::invalid_argument("--steps: must be at least 1");
  if (options.op_times && impl_->backend != measure::Backend::Cpu)
    throw std::invalid_argument("--op-times: times ops on the host's clock, which is the CPU testbed's time only; "
                                "on a GPU use --trace-out");
  if (options.stage_times_in_rounds && impl_->backend != measure::Backend::Cpu)
    throw std::invalid_argument("stage times from the measured rounds: timed on the host's clock, the CPU testbed's "
                                "time only; a GPU profile's times are its own");
  if (options.warmup_steps < 0) throw std::invalid_argument("--warmup-steps: must be at least 0");
  if (sources.size() != schedules.size()) throw std::invalid_argument("measure_interleaved: one source per schedule");
  model::StagedModel& model = impl_->model;
  measure::MemoryMeter& meter = *impl_->meter;
  at::set_num_threads(impl_->threads);
  // Note [Checked steps are deterministic]
  // A checked step is compared with plain training bit for bit, which on a GPU holds
  // only with deterministic kernels: cuBLAS picks its reduction order per call
  // unless its workspace is fixed (before its first handle, so here, before any
  // step), and some ATen kernels accumulate with atomics unless asked not to. Only
  // the checked steps run with deterministic algorithms; the measured ones use the
  // kernels training uses (cuBLAS keeps its fixed workspace).
  //
  // Note [The warm-up steps are the checked ones]
  // A plain autograd step run right after a measured one, and the deterministic
  // kernels a checked step needs, change the measured steps: the plain step leaves the
  // caches and the allocator holding its own data when the next schedule's step
  // starts, and deterministic kernels are not always the ones training uses. Then the
  // measured times, and their distance from a prediction built on unchecked stage
  // times, depend on whether the run checks. So the check compares the warm-up steps
  // (at least one, added where there are none) and the measured steps run exactly as
  // they would without it, deterministic algorithms back as they were.
  const bool deterministic_before = at::globalContext().deterministicAlgorithms();
  const bool warn_only_before = at::globalContext().deterministicAlgorithmsWarnOnly();
  if (options.check && impl_->device.is_cuda()) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  const int num_warmup = warmup_rounds(options);
  struct RestoreDeterminism {
    bool on, warn_only;
    ~RestoreDeterminism() { at::globalContext().setDeterministicAlgorithms(on, warn_only); }
  } restore_determinism{deterministic_before, warn_only_before};
  // Everything a schedule needs is set up, and checked, before the first step of any.
  // Note [One copy engine per run]: the schedules share one engine on the chain's
  // link, its host pool sized for the largest of them; pinned memory is slow to take
  // and a pool per schedule would hold the sum of them.
  std::vector<ExecutorOptions> executors(schedules.size());
  std::vector<char> copies(schedules.size(), 0);
  std::optional<CopyEngineOptions> engine_options;
  for (size_t k = 0; k < schedules.size(); ++k) {
    check_schedule_fits_model(schedules[k], model, sources[k]);
    // Offloading schedules copy through an engine on the chain's link (emulated on the CPU).
    if (const std::optional<CopyPlan> plan = plan_copies(chain, schedules[k].ops, sources[k])) {
      copies[k] = 1;
      if (!engine_options) engine_options = plan->engine;
      engine_options->host_pool_bytes = std::max(engine_options->host_pool_bytes, plan->engine.host_pool_bytes);
      executors[k].offload_done_before = plan->offload_done_before;
    }
    // Can the device really hold this plan? AdamW's two moments per parameter are
    // allocated at its first step.
    check_device_memory(meter, solver::simulate_timeline(chain, schedules[k].ops).peak_bytes,
                        unallocated_state_bytes(model, /*optimizer_moments=*/2), sources[k]);
  }
  std::unique_ptr<CopyEngine> engine;
  if (engine_options) engine = make_copy_engine(impl_->device, *engine_options);
  for (size_t k = 0; k < schedules.size(); ++k)
    if (copies[k]) executors[k].copy_engine = engine.get();
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(options.lr));
  model.train(true);
  std::vector<ScheduleMeasurement> out(schedules.size());
  measure::WallClockTracer op_clock;
  std::vector<std::vector<std::vector<double>>> op_ms(schedules.size());  // [schedule][step][op]
  const int num_rounds = num_warmup + options.steps;
  // Note [Stage times from the measured rounds]
  const std::vector<std::vector<solver::Op>> timing_schedules =
      options.stage_times_in_rounds ? stage_timing_schedules(chain) : std::vector<std::vector<solver::Op>>{};
  measure::WallClockTracer timing_clocks[2];
  for (int round = 0; round < num_rounds; ++round) {
    const bool checked = options.check && round < num_warmup;
    if (options.check) {
      if (checked) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
      else at::globalContext().setDeterministicAlgorithms(deterministic_before, warn_only_before);
    }
    for (size_t t = 0; t < timing_schedules.size(); ++t) {
      timing_clocks[t].recording = round >= num_warmup;
      ExecutorOptions timing;
      timing.tracer = &timing_clocks[t];
      zero_grads_in_place(model);
      run_step_or_restore(model, timing_schedules[t], impl_->batch, meter, timing, "the stage-timing step",
                          impl_->timer.get());
      timing_clocks[t].collect();  // drops the ranges; the times are already recorded
      optimizer.step();
    }
    for (size_t k = 0; k < schedules.size(); ++k) {
      zero_grads_in_place(model);
      const RngState rng_before = rng_state(impl_->batch.input.device());
      const bool time_ops = options.op_times && round >= num_warmup;
      op_clock.recording = time_ops;
      executors[k].tracer = time_ops ? &op_clock : nullptr;
      const StepResult r = run_step_or_restore(model, schedules[k].ops, impl_->batch, meter, executors[k],
                                               sources[k], impl_->timer.get());
      if (executors[k].copy_engine) executors[k].copy_engine->finish_step();
      if (time_ops) {
        op_clock.collect();  // drops the ranges; the times are in op_clock.timed
        std::vector<double>& step_ms = op_ms[k].emplace_back();
        for (const measure::WallClockTracer::Timed& t : op_clock.timed) step_ms.push_back(t.ms);
        op_clock.timed.clear();
        executors[k].tracer = nullptr;
      }
      StepMeasurement m;
      m.step = round + 1;
      m.warmup = round < num_warmup;
      m.loss = r.loss;
      m.activation_peak_bytes = r.activation_peak_bytes;
      m.reserved_peak_bytes = meter.peak_reserved_bytes();
      m.time_ms = r.time_ms;
      if (checked) {
        const auto scheduled = gradients(model);
        set_rng_state(rng_before);  // the plain step draws the same dropout masks
        zero_grads_in_place(model);
        const StepResult plain = run_plain_step(model, impl_->batch, meter, impl_->timer.get());
        const GradientDiff diff = compare_gradients(scheduled, gradients(model));
        m.checked = true;
        m.max_abs_grad_diff = diff.max_abs_diff;
        m.max_abs_grad_ref = diff.max_abs_ref;
        m.loss_diff = std::abs(plain.loss - r.loss);
        out[k].max_abs_grad_diff = std::max(out[k].max_abs_grad_diff.value_or(0.0), diff.max_abs_diff);
      }
      if (options.on_step) options.on_step(static_cast<int>(k), m);
      out[k].steps.push_back(m);
      optimizer.step();
    }
  }
  if (options.trace) {
    const std::unique_ptr<measure::StageTracer> tracer = measure::make_stage_tracer(impl_->backend);
    for (size_t k = 0; k < schedules.size(); ++k) {
      zero_grads_in_place(model);
      executors[k].tracer = tracer.get();
      run_step_or_restore(model, schedules[k].ops, impl_->batch, meter, executors[k], sources[k], impl_->timer.get());
      if (executors[k].copy_engine) executors[k].copy_engine->finish_step();
      executors[k].tracer = nullptr;
      out[k].trace = tracer->collect();
    }
  }
  for (ScheduleMeasurement& sm : out) {
    std::vector<double> peaks, times;
    for (const StepMeasurement& m : sm.steps) {
      if (m.warmup) continue;
      peaks.push_back(static_cast<double>(m.activation_peak_bytes));
      times.push_back(m.time_ms);
      sm.reserved_peak_bytes = std::max(sm.reserved_peak_bytes, m.reserved_peak_bytes);
    }
    sm.median_peak_bytes = static_cast<int64_t>(common::median(peaks));
    sm.time_ms = common::spread(times);
  }
  if (options.op_times)
    for (size_t k = 0; k < schedules.size(); ++k) out[k].op_times = op_time_rows(chain, schedules[k].ops, op_ms[k]);
  if (options.stage_times_in_rounds)
    *options.stage_times_in_rounds = stage_times_from(stage_names(model), timing_clocks[0], timing_clocks[1]);
  return out;
}

void ProfiledModel::retime_stages(solver::Chain& chain) {
  if (impl_->backend != measure::Backend::Cpu)
    throw std::invalid_argument("re-timing stages: only on the CPU testbed; a GPU profile's times are its own");
  StageTimingOptions options;
  options.threads = impl_->threads;
  apply_stage_times(chain, time_stages_in_steps(impl_->model, impl_->batch, chain, options));
}

ScheduleMeasurement ProfiledModel::measure(const solver::Chain& chain, const solver::Schedule& schedule,
                                           const MeasureOptions& options, const std::string& source) {
  return measure_interleaved(chain, {schedule}, options, {source}).front();
}

nlohmann::json run_summary_json(const std::string& profile_source, const std::string& schedule_source,
                                const solver::Schedule& schedule, const solver::SimResult& predicted,
                                const ScheduleMeasurement& measured) {
  int num_measured = 0;
  for (const StepMeasurement& m : measured.steps) num_measured += m.warmup ? 0 : 1;
  nlohmann::json line = {{"profile", profile_source},
                         {"schedule", schedule_source},
                         {"solver", schedule.solver},
                         {"budget_bytes", schedule.budget_bytes},
                         {"predicted", {{"peak_bytes", predicted.peak_bytes}, {"time_ms", predicted.time_ms}}},
                         {"measured",
                          {{"peak_bytes", measured.median_peak_bytes},
                           {"reserved_peak_bytes", measured.reserved_peak_bytes},
                           {"time_ms", measured.time_ms.median},
                           {"time_q25_ms", measured.time_ms.q25},
                           {"time_q75_ms", measured.time_ms.q75}}},
                         {"steps", num_measured},
                         {"warmup_steps", static_cast<int>(measured.steps.size()) - num_measured}};
  if (measured.max_abs_grad_diff) line["max_abs_grad_diff"] = *measured.max_abs_grad_diff;
  return line;
}

}  // namespace memopt::runtime

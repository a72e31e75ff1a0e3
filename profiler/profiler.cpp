// profiler.cpp: measure_chain, following Note [Stage byte accounting] step by step.
#include "profiler/profiler.h"

#include <algorithm>
#include <vector>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include "common/stats.h"
#include "measure/cpu_allocator.h"

namespace memopt::profiler {
namespace {

int64_t storage_bytes(const at::Tensor& t) { return static_cast<int64_t>(t.storage().nbytes()); }

// Restores what measure_chain changes, however it leaves.
class ModelStateGuard {
 public:
  ModelStateGuard(model::StagedModel& model, int threads)
      : model_(model), was_training_(model.is_training()), threads_(at::get_num_threads()) {
    model_.train(true);
    at::set_num_threads(threads);
    params_ = model.parameters();
    for (at::Tensor& p : params_) {
      had_grad_.push_back(p.grad().defined());
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    }
  }
  ~ModelStateGuard() {
    for (size_t k = 0; k < params_.size(); ++k) {
      if (had_grad_[k]) params_[k].mutable_grad().zero_();
      else params_[k].mutable_grad().reset();
    }
    model_.train(was_training_);
    at::set_num_threads(threads_);
  }
  void zero_grads() {
    for (at::Tensor& p : params_) p.mutable_grad().zero_();
  }

 private:
  model::StagedModel& model_;
  bool was_training_;
  int threads_;
  std::vector<at::Tensor> params_;
  std::vector<bool> had_grad_;
};

// Note [Cold caches]
// Timed right after its forward, a stage's backward finds the forward's tensors and
// weights in the CPU caches; in a store-all step every later stage runs in between,
// so it does not, and that step ran about 10% slower than the sum of its stages.
// Before the timed backward the profiler therefore walks a buffer larger than the
// last-level cache (malloc'd, so the counting allocator never sees it). Forwards stay
// hot: in a step a forward reads the activation its predecessor just wrote. (After a
// recomputation the backward is hot again; such steps now run a little faster than
// predicted -- see the README's measured/predicted figures.)
void evict_caches() {
  static constexpr size_t kBytes = size_t{64} << 20;
  static std::vector<char>* buffer = new std::vector<char>(kBytes, 1);  // never freed: one per process
  volatile char sink = 0;
  for (size_t k = 0; k < kBytes; k += 64) (*buffer)[k] = static_cast<char>((*buffer)[k] + 1);
  sink = (*buffer)[kBytes / 2];
  (void)sink;
}

// One run of the protocol on one stage.
struct Run {
  double fwd_ms, bwd_ms, fwd_nograd_ms;
  int64_t out_bytes, saved_bytes, carried_bytes, fwd_tmp_grad_bytes, fwd_tmp_nograd_bytes, bwd_tmp_bytes,
      input_grad_bytes;
  model::Activation output;  // a_{i+1}, from the run without grad
};

Run run_stage(const model::StagedModel& model, int i, const model::Activation& a, const model::Batch& batch,
              measure::MemoryMeter& meter, measure::Timer& timer, measure::StageTracer* tracer) {
  Run r{};
  const std::string& name = model.stage(i).name;
  {
    // Step 1: forward under autograd, on detached leaves (a_0 needs no gradient).
    const model::Activation x = model::detached_leaves(a, /*with_grad=*/i > 0);
    const int64_t before_fwd = meter.current_bytes();
    meter.reset_peak();
    model::Activation y;
    {
      measure::StageRange range(tracer, "fwd_keep", name);
      timer.start();
      y = model.forward_stage(i, x, batch);
      r.fwd_ms = timer.stop_ms();
    }
    const int64_t after_fwd = meter.current_bytes();
    // Note [Multi-tensor activations]: what the output carries over from the input
    // existed before; it is part of a_{i+1} and of ā_{i+1} all the same.
    r.carried_bytes = model::carried_bytes(x, y);
    r.saved_bytes = after_fwd - before_fwd + r.carried_bytes;
    r.fwd_tmp_grad_bytes = meter.peak_bytes() - after_fwd;
    r.out_bytes = model::activation_bytes(y);
    bool any_grad = false;
    for (const at::Tensor& t : y) any_grad = any_grad || t.requires_grad();
    if (!any_grad)
      throw std::runtime_error("profiler: stage '" + name +
                               "' returned no tensor that requires grad; it has no parameters or "
                               "does not use its input");

    // Step 2: backward from seed gradients shaped like the output.
    model::Activation seed;
    for (const at::Tensor& t : y) seed.push_back(at::ones_like(t, at::MemoryFormat::Contiguous));
    evict_caches();
    const int64_t before_bwd = meter.current_bytes();
    meter.reset_peak();
    model::Activation d;
    {
      measure::StageRange range(tracer, "bwd", name);
      timer.start();
      d = model::backward_stage(y, x, seed);
      r.bwd_ms = timer.stop_ms();
    }
    r.input_grad_bytes = model::activation_bytes(d);
    // The model's d_i is as big as a_i, real or not, and shares the carried bytes with
    // d_{i+1} (docs/formats.md, "Carried bytes"): only the rest is new.
    const int64_t d_i_bytes = model::activation_bytes(a) - r.carried_bytes;
    // Negative when the backward frees saved tensors before d_i is whole: Note [A
    // backward may peak below its gradient] in solver/chain/chain.h.
    r.bwd_tmp_bytes = meter.peak_bytes() - before_bwd - d_i_bytes;
  }
  {
    // Step 3: forward without grad, as fwd_ckpt and fwd_drop run it.
    at::NoGradGuard no_grad;
    meter.reset_peak();
    model::Activation y;
    {
      measure::StageRange range(tracer, "fwd_nograd", name);
      timer.start();
      y = model.forward_stage(i, a, batch);
      r.fwd_nograd_ms = timer.stop_ms();
    }
    r.fwd_tmp_nograd_bytes = std::max<int64_t>(0, meter.peak_bytes() - meter.current_bytes());
    r.output = std::move(y);
  }
  r.fwd_tmp_grad_bytes = std::max<int64_t>(0, r.fwd_tmp_grad_bytes);
  r.saved_bytes = std::max(r.saved_bytes, r.out_bytes);  // a stage returning a view of its input
  return r;
}

}  // namespace

Measurement measure_chain(model::StagedModel& model, const model::Batch& batch, measure::MemoryMeter& meter, measure::Timer& timer,
                          const ProfileOptions& options) {
  if (options.repeat < 1) throw std::invalid_argument("profiler: repeat must be at least 1");
  if (options.warmup < 0) throw std::invalid_argument("profiler: warmup must be non-negative");
  if (options.threads < 1) throw std::invalid_argument("profiler: threads must be at least 1");
  if (!batch.input.defined()) throw std::invalid_argument("profiler: the batch has no input");
  ModelStateGuard guard(model, options.threads);

  Measurement m;
  m.chain.input_bytes = storage_bytes(batch.input);
  const int L = model.num_stages();
  model::Activation a{batch.input};  // a_i, passed from stage to stage
  if (options.on_progress) options.on_progress(0, L);
  for (int i = 0; i < L; ++i) {
    std::vector<double> fwd, bwd, fwd_nograd;
    solver::Stage s;
    s.name = model.stage(i).name;
    s.role = model.stage(i).role;
    s.block = model.stage(i).block;
    StageDetail d;
    model::Activation next;
    for (int run = 0; run < options.warmup + options.repeat; ++run) {
      guard.zero_grads();
      // Warm-up runs stay outside the trace, as they stay outside the medians.
      Run r = run_stage(model, i, a, batch, meter, timer, run < options.warmup ? nullptr : options.tracer);
      if (run < options.warmup) continue;
      fwd.push_back(r.fwd_ms);
      bwd.push_back(r.bwd_ms);
      fwd_nograd.push_back(r.fwd_nograd_ms);
      s.out_bytes = std::max(s.out_bytes, r.out_bytes);
      s.carried_bytes = r.carried_bytes;
      s.saved_bytes = std::max(s.saved_bytes, r.saved_bytes);
      d.fwd_tmp_grad_bytes = std::max(d.fwd_tmp_grad_bytes, r.fwd_tmp_grad_bytes);
      d.fwd_tmp_nograd_bytes = std::max(d.fwd_tmp_nograd_bytes, r.fwd_tmp_nograd_bytes);
      // The first measured run sets it: it may be negative (Note [A backward may peak below its gradient]).
      s.bwd_tmp_bytes = run == options.warmup ? r.bwd_tmp_bytes : std::max(s.bwd_tmp_bytes, r.bwd_tmp_bytes);
      d.input_grad_bytes = std::max(d.input_grad_bytes, r.input_grad_bytes);
      next = r.output;
    }
    s.fwd_ms = common::median(fwd);
    s.bwd_ms = common::median(bwd);
    d.fwd_nograd_ms = common::median(fwd_nograd);
    s.fwd_tmp_bytes = std::max(d.fwd_tmp_grad_bytes, d.fwd_tmp_nograd_bytes);
    // fwd_keep's own transient (Note [Two forward temporaries] in solver/chain/chain.h);
    // fwd_tmp_bytes stays the max, so readers that know only fwd_tmp_bytes never under-predict.
    s.fwd_keep_tmp_bytes = d.fwd_tmp_grad_bytes;
    s.fwd_nograd_ms = common::median(fwd_nograd);
    m.chain.stages.push_back(s);
    m.details.push_back(d);
    a = next;
    if (options.on_progress) options.on_progress(i + 1, L);
  }
  // The loss op only seeds d_L (Note [Why the loss is a stage]); nothing to measure.
  m.chain.loss = {0.0, 0};
  return m;
}

int64_t static_bytes(const model::StagedModel& model) { return 4 * model.parameter_bytes(); }

namespace {

// The one place a measurement becomes a profile, whatever the backend: the chain,
// what rebuilds the model, the device, the static bytes and where each parameter
// lives (Note [Parameter homes]: what `memopt plan` needs to size ZeRO's partitions).
MeasuredProfile assemble_profile(Measurement m, const model::StagedModel& model, nlohmann::ordered_json model_json,
                                 nlohmann::ordered_json device_json) {
  MeasuredProfile out;
  solver::Profile& p = out.profile;
  p.chain = std::move(m.chain);
  p.model = std::move(model_json);
  p.device = std::move(device_json);
  p.measured = true;
  p.static_bytes = static_bytes(model);
  const model::ParameterHomes homes = model::parameter_homes(model);
  const std::vector<at::Tensor> params = model.parameters();
  for (int i = 0; i < p.chain.length(); ++i) {
    solver::Stage& st = p.chain.stages[i];
    int64_t own = 0;
    for (const int k : homes.homed[i]) own += static_cast<int64_t>(params[k].nbytes());
    st.param_bytes = own;
    std::map<int, int64_t> reads;
    for (const int k : homes.foreign_reads[i]) reads[homes.home[k]] += static_cast<int64_t>(params[k].nbytes());
    st.param_reads.assign(reads.begin(), reads.end());
  }
  out.details = std::move(m.details);
  return out;
}

}  // namespace

MeasuredProfile profile_cpu_detailed(model::StagedModel& model, const model::Batch& batch,
                                     nlohmann::ordered_json model_json, const ProfileOptions& options) {
  measure::CpuMemoryMeter meter;
  measure::CpuTimer timer;
  return assemble_profile(measure_chain(model, batch, meter, timer, options), model, std::move(model_json),
                          measure::device_json(measure::Backend::Cpu, options.threads));
}

DeviceProfile profile_on(measure::Backend backend, model::StagedModel& model, const model::Batch& batch,
                         nlohmann::ordered_json model_json, const ProfileOptions& options) {
  auto meter = measure::make_memory_meter(backend);
  auto timer = measure::make_timer(backend);
  auto tracer = measure::make_stage_tracer(backend);  // CPU: ranges only
  ProfileOptions traced = options;
  traced.tracer = tracer.get();
  DeviceProfile out{assemble_profile(measure_chain(model, batch, *meter, *timer, traced), model, std::move(model_json),
                                     measure::device_json(backend, options.threads)),
                    {}};
  out.trace = tracer->collect();
  return out;
}

solver::Profile profile_cpu(model::StagedModel& model, const model::Batch& batch, nlohmann::ordered_json model_json,
                            const ProfileOptions& options) {
  return profile_cpu_detailed(model, batch, std::move(model_json), options).profile;
}

nlohmann::ordered_json profile_json(const MeasuredProfile& measured) {
  nlohmann::ordered_json j = solver::profile_to_json(measured.profile);
  nlohmann::ordered_json& stages = j.at("stages");
  for (size_t i = 0; i < measured.details.size() && i < stages.size(); ++i) {
    const StageDetail& d = measured.details[i];
    stages[i]["fwd_nograd_ms"] = d.fwd_nograd_ms;
    stages[i]["fwd_tmp_grad_bytes"] = d.fwd_tmp_grad_bytes;
    stages[i]["fwd_tmp_nograd_bytes"] = d.fwd_tmp_nograd_bytes;
  }
  return j;
}

}  // namespace memopt::profiler

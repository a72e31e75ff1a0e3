// stage_timing.cpp: Note [Stage times from training steps].
#include "runtime/stage_timing.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <map>
#include <stdexcept>
#include <string>

#include "common/stats.h"
#include "measure/cpu_allocator.h"
#include "measure/wall_clock_tracer.h"
#include "runtime/executor.h"
#include "runtime/train_step.h"
#include "solver/dp/baselines.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {
namespace {

// Label -> every duration the tracer timed under it.
using TimesByLabel = std::map<std::string, std::vector<double>>;

TimesByLabel by_label(const measure::WallClockTracer& tracer) {
  TimesByLabel out;
  for (const measure::WallClockTracer::Timed& t : tracer.timed) out[t.label].push_back(t.ms);
  return out;
}

double median_of(const TimesByLabel& times, const std::string& op, const std::string& stage) {
  const auto it = times.find(measure::range_label(op, stage));
  if (it == times.end() || it->second.empty())
    throw std::logic_error("stage timing: no timed " + op + " of stage " + stage);
  return common::median(it->second);
}

}  // namespace

StageTimes time_stages_in_steps(model::StagedModel& model, const model::Batch& batch, const solver::Chain& chain,
                                const StageTimingOptions& options) {
  if (chain.length() != model.num_stages())
    throw std::invalid_argument("stage timing: the chain has " + std::to_string(chain.length()) +
                                " stages, the model " + std::to_string(model.num_stages()));
  if (options.rounds < 1 || options.warmup_rounds < 0 || options.threads < 1)
    throw std::invalid_argument("stage timing: needs rounds >= 1, warmup_rounds >= 0, threads >= 1");
  const int threads_before = at::get_num_threads();
  at::set_num_threads(options.threads);
  const RngState rng_before = rng_state(batch.input.device());
  const bool was_training = model.is_training();
  model.train(true);
  std::vector<at::Tensor> params_before, grads_before;
  for (const at::Tensor& p : model.parameters()) {
    params_before.push_back(p.detach().clone());
    grads_before.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  }
  // An optimizer steps between the steps, as in training: it walks every parameter
  // and both moments, which leaves the next step's caches as training leaves them.
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(1e-4));
  const std::vector<std::vector<solver::Op>> schedules = stage_timing_schedules(chain);
  measure::WallClockTracer tracers[2];
  measure::CpuMemoryMeter meter;
  for (int round = 0; round < options.warmup_rounds + options.rounds; ++round) {
    for (size_t k = 0; k < schedules.size(); ++k) {
      tracers[k].recording = round >= options.warmup_rounds;
      ExecutorOptions executor;
      executor.tracer = &tracers[k];
      zero_grads_in_place(model);
      run_scheduled_step(model, schedules[k], batch, meter, executor);
      tracers[k].collect();  // drops the ranges; the times are already recorded
      optimizer.step();
    }
  }
  const StageTimes t = stage_times_from(stage_names(model), tracers[0], tracers[1]);
  // As it was: parameters, gradients, generator, mode and threads.
  const std::vector<at::Tensor> params = model.parameters();
  {
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      const_cast<at::Tensor&>(params[k]).copy_(params_before[k]);
      at::Tensor& g = const_cast<at::Tensor&>(params[k]).mutable_grad();
      if (grads_before[k].defined()) g.copy_(grads_before[k]);
      else g.reset();
    }
  }
  set_rng_state(rng_before);
  model.train(was_training);
  at::set_num_threads(threads_before);
  return t;
}

std::vector<std::vector<solver::Op>> stage_timing_schedules(const solver::Chain& chain) {
  // Store-all times fwd_keep and bwd; checkpointing every stage input times each
  // stage's no-grad forward once per step.
  return {solver::store_all_ops(chain), solver::recompute_blocks_ops(chain)};
}

std::vector<std::string> stage_names(const model::StagedModel& model) {
  std::vector<std::string> names;
  for (int i = 0; i < model.num_stages(); ++i) names.push_back(model.stage(i).name);
  return names;
}

StageTimes stage_times_from(const std::vector<std::string>& names, const measure::WallClockTracer& store_all_tracer,
                            const measure::WallClockTracer& checkpointed_tracer) {
  const TimesByLabel store_all = by_label(store_all_tracer);
  const TimesByLabel checkpointed = by_label(checkpointed_tracer);
  StageTimes t;
  for (const std::string& name : names) {
    t.fwd_ms.push_back(median_of(store_all, "fwd_keep", name));
    t.bwd_ms.push_back(median_of(store_all, "bwd", name));
    // The last stage is never checkpointed (the loss follows it), so it never runs
    // without grad in any plan; its no-grad time is then its forward's. A stage that
    // was checkpointed ran fwd_keep and bwd back to back after the loss.
    const bool timed = checkpointed.count(measure::range_label("fwd_ckpt", name)) > 0;
    t.fwd_nograd_ms.push_back(timed ? median_of(checkpointed, "fwd_ckpt", name) : t.fwd_ms.back());
    t.fwd_bwd_pair_ms.push_back(timed ? median_of(checkpointed, "fwd_keep", name) + median_of(checkpointed, "bwd", name)
                                      : t.fwd_ms.back() + t.bwd_ms.back());
  }
  return t;
}

void apply_stage_times(solver::Chain& chain, const StageTimes& times) {
  const auto n = static_cast<size_t>(chain.length());
  if (times.fwd_ms.size() != n || times.bwd_ms.size() != n || times.fwd_nograd_ms.size() != n ||
      times.fwd_bwd_pair_ms.size() != n)
    throw std::invalid_argument("stage timing: times for " + std::to_string(times.fwd_ms.size()) + " stages, chain of " +
                                std::to_string(chain.length()));
  for (int i = 0; i < chain.length(); ++i) {
    chain.stages[i].fwd_ms = times.fwd_ms[i];
    chain.stages[i].bwd_ms = times.bwd_ms[i];
    chain.stages[i].fwd_nograd_ms = times.fwd_nograd_ms[i];
    chain.stages[i].fwd_bwd_pair_ms = times.fwd_bwd_pair_ms[i];
  }
}

}  // namespace memopt::runtime

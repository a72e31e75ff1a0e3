// optimize.cpp: profile -> solve -> a module that trains along the schedule.
#include "optimize/optimize.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/io/json_printer.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"

namespace memopt {
namespace {

// Carries one step's ScheduleRunner from forward() to backward() through the
// autograd context.
struct RunnerHolder : torch::CustomClassHolder {
  std::unique_ptr<runtime::ScheduleRunner> runner;
  std::shared_ptr<void> in_flight;  // run_scheduled_step's token
};

// The batch's targets and step inputs reach the stages only, never autograd: wrapped
// so that Function::apply does not take them (possibly undefined) for differentiable
// inputs.
struct Targets {
  at::Tensor tensor;
  std::vector<at::Tensor> step_inputs;
};

struct ScheduledChain : torch::autograd::Function<ScheduledChain> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const model::StagedModel* model,
                            const solver::Schedule* schedule, runtime::ExecutorOptions options, const at::Tensor& x,
                            const Targets& targets, const at::Tensor& anchor, std::shared_ptr<void> in_flight) {
    auto holder = c10::make_intrusive<RunnerHolder>();
    holder->in_flight = std::move(in_flight);
    holder->runner = std::make_unique<runtime::ScheduleRunner>(*model, schedule->ops, options);
    // Note [A plan that moves a_0 runs on a copy]
    // offload 0 and offload_input 0 take a_0's storage off the device while the step
    // runs, from under every other holder of it: the caller's tensor, and labels that
    // are the same tensor as the inputs (model(input_ids=ids, labels=ids)). Such a
    // plan runs on a copy of the input, as `memopt run` does (Note [The step owns
    // a_0]); any other plan reads the caller's tensor.
    const bool moves_a0 = std::any_of(schedule->ops.begin(), schedule->ops.end(), [](const solver::Op& op) {
      return op.index == 0 && solver::is_offload(op.kind);
    });
    const at::Tensor a_L = holder->runner->run_forward(
        model::Batch{moves_a0 ? x.detach().clone() : x.detach(), targets.tensor, targets.step_inputs});
    ctx->saved_data["runner"] = at::IValue::make_capsule(holder);
    // The caller's tensor must not carry the inner graph of a kept last stage.
    return a_L.detach();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto capsule = ctx->saved_data["runner"].toCapsule();
    auto* holder = static_cast<RunnerHolder*>(capsule.get());
    at::Tensor d0 = holder->runner->run_backward(grad_outputs[0]);
    holder->runner.reset();
    holder->in_flight.reset();
    // One gradient per forward() argument: none for the model, schedule, options,
    // targets, anchor and token.
    return {at::Tensor(), at::Tensor(), at::Tensor(), d0, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor run_scheduled_step(const model::StagedModel& model, const solver::Schedule& schedule,
                              const runtime::ExecutorOptions& options, const model::Batch& batch,
                              const at::Tensor& anchor, std::shared_ptr<void> in_flight) {
  return ScheduledChain::apply(&model, &schedule, options, batch.input, Targets{batch.targets, batch.step_inputs}, anchor,
                               std::move(in_flight));
}

OptimizedSequentialImpl::OptimizedSequentialImpl(torch::nn::Sequential seq, solver::Schedule schedule,
                                                 runtime::ExecutorOptions options)
    : seq_(register_module("seq", seq)),
      staged_(model::StagedModel::from_sequential(seq.ptr())),
      schedule_(std::move(schedule)),
      options_(options),
      anchor_(at::zeros({}).requires_grad_(true)) {
  runtime::check_schedule_fits_model(schedule_, staged_);
}

at::Tensor OptimizedSequentialImpl::forward(const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return seq_->forward(x);
  return run_scheduled_step(staged_, schedule_, options_, model::Batch{x, {}}, anchor_);
}

OptimizedSequential optimize(torch::nn::Sequential seq, const at::Tensor& sample, const OptimizeOptions& options) {
  if (!options.load_schedule.empty() && std::filesystem::exists(options.load_schedule)) {
    solver::Schedule schedule = solver::read_schedule(options.load_schedule);
    return OptimizedSequential(seq, std::move(schedule), options.executor);
  }
  const auto kind = solver::solver_kind_from_word(options.solver);
  if (!kind) throw std::invalid_argument("memopt::optimize: unknown solver '" + options.solver + "'");
  model::StagedModel staged = model::StagedModel::from_sequential(seq.ptr());
  const solver::Profile profile = profiler::profile_cpu(
      staged, model::Batch{sample, {}}, nlohmann::json{{"name", "sequential"}, {"stages", staged.num_stages()}},
      options.profile);
  solver::SolveOptions solve_options{0, *kind, options.slots};
  solve_options.budget_bytes = solver::budget_from_text(options.budget, profile.chain, solve_options);
  solver::Schedule schedule = solver::solve(profile.chain, solve_options);
  if (!options.save_schedule.empty()) {
    solver::write_json_atomic(options.save_schedule, solver::schedule_to_json(schedule));
    const std::filesystem::path path(options.save_schedule);
    solver::write_json_atomic((path.parent_path() / (path.stem().string() + ".profile.json")).string(),
                              solver::profile_to_json(profile));
  }
  return OptimizedSequential(seq, std::move(schedule), options.executor);
}

}  // namespace memopt

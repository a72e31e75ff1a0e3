// optimize.h: the C++ API users call -- wrap an existing torch::nn::Sequential so an
// ordinary training loop (`loss.backward(); optimizer.step();`) runs it along a
// memopt schedule, like rotor's Checkpointable:
//
//   auto net = memopt::optimize(seq, sample, {.budget = "60%"});
//   auto loss = criterion(net->forward(x), y);
//   loss.backward();      // recomputes as planned, gradients as plain training
//   optimizer.step();
//
// optimize() profiles the Sequential on `sample`, solves for the budget and returns
// a module whose forward runs the schedule's forward part and whose backward runs
// the rest (one custom autograd function around the whole chain).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include "model/staged_model.h"
#include "profiler/profiler.h"
#include "runtime/executor.h"
#include "solver/chain/schedule.h"

namespace memopt {

struct OptimizeOptions {
  // Activation budget: "4GiB", "3.5GB", "4000000000", "60%" (of the store-all peak)
  // or "min". Ignored when a schedule is loaded.
  std::string budget = "100%";
  std::string solver = "optimal";  // any `memopt solve --solver` word
  int slots = 500;
  // A plan saved earlier: when the file exists it is used and nothing is profiled.
  std::string load_schedule;
  // Where to save the plan (and, beside it as <name>.profile.json, the profile).
  std::string save_schedule;
  profiler::ProfileOptions profile;
  runtime::ExecutorOptions executor;
};

// One training step of `model` along `schedule`, as one custom autograd function:
// returns a_L (the loss, for a model that ends with it) having run every op before
// `loss`; its backward runs the rest and returns d_0. Parameters are not inputs of
// the function: their gradients accumulate inside it, so `anchor` (a scalar that
// requires grad) is what makes a_L require grad when nothing else fed to it does.
// `model`, `schedule` and the options' pointees must outlive the backward.
// `in_flight`, when given, is held from the forward until the backward has run (or
// the graph is dropped without one), so that a caller can tell a step is under way.
at::Tensor run_scheduled_step(const model::StagedModel& model, const solver::Schedule& schedule,
                              const runtime::ExecutorOptions& options, const model::Batch& batch,
                              const at::Tensor& anchor, std::shared_ptr<void> in_flight = nullptr);

class OptimizedSequentialImpl : public torch::nn::Module {
 public:
  OptimizedSequentialImpl(torch::nn::Sequential seq, solver::Schedule schedule, runtime::ExecutorOptions options);

  // Under autograd: the schedule (a_L returned, the rest in backward). Without grad
  // (evaluation): the plain chain.
  at::Tensor forward(const at::Tensor& x);

  const solver::Schedule& schedule() const { return schedule_; }
  const model::StagedModel& staged() const { return staged_; }

 private:
  torch::nn::Sequential seq_;
  model::StagedModel staged_;
  solver::Schedule schedule_;
  runtime::ExecutorOptions options_;
  // Makes the output require grad even when neither x nor anything else fed to the
  // autograd function does, so that backward reaches the schedule (parameters are
  // not inputs of the function: their gradients accumulate inside it).
  at::Tensor anchor_;
};
TORCH_MODULE(OptimizedSequential);

OptimizedSequential optimize(torch::nn::Sequential seq, const at::Tensor& sample, const OptimizeOptions& options = {});

}  // namespace memopt

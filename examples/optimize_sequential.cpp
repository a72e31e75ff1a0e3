// optimize_sequential.cpp: memopt's C++ API on an ordinary LibTorch training loop.
// Built as build/examples/optimize_sequential and run by the test suite; the README
// shows this file verbatim.
#include <cstdio>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "optimize/optimize.h"

int main() {
  torch::manual_seed(0);
  // Any Sequential works; each child becomes one stage of the chain.
  torch::nn::Sequential seq(
      torch::nn::Linear(256, 1024), torch::nn::GELU(), torch::nn::Dropout(0.1),
      torch::nn::Linear(1024, 1024), torch::nn::GELU(), torch::nn::Dropout(0.1),
      torch::nn::Linear(1024, 1024), torch::nn::GELU(), torch::nn::Linear(1024, 10));
  const at::Tensor x = torch::randn({128, 256});
  const at::Tensor y = torch::randint(0, 10, {128});

  // Profile on a sample batch, solve for 70% of the store-all activation peak, and
  // keep the plan: the next run with load_schedule skips profiling and solving.
  memopt::OptimizeOptions options;
  options.budget = "70%";
  options.save_schedule = "optimize_sequential.schedule.json";
  auto net = memopt::optimize(seq, x, options);
  std::printf("plan: %zu ops, predicted peak %lld B, time %.2f ms\n", net->schedule().ops.size(),
              static_cast<long long>(net->schedule().predicted.peak_bytes), net->schedule().predicted.time_ms);

  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05));
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();  // runs the rest of the schedule: recomputes, then back-propagates
    optimizer.step();
    std::printf("step %d  loss %.4f\n", step, loss.item<double>());
  }
  return 0;
}

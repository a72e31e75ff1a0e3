// test_util.h: tensor comparison with explicit per-quantity tolerances for the
// runtime tests, and the stage-by-stage backward an executor performs.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/staged_model.h"

namespace memopt::model::testing {

// Passes when |actual - expected| <= atol + rtol * |expected| everywhere; otherwise
// names the worst element and by how much it misses.
inline ::testing::AssertionResult all_close(const at::Tensor& actual, const at::Tensor& expected, double atol,
                                            double rtol) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << " != expected " << expected.sizes();
  const at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
  const at::Tensor excess = (a - e).abs() - (atol + rtol * e.abs());
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  const double worst_excess = excess.flatten()[worst].item<double>();
  if (worst_excess <= 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst << ": " << a.flatten()[worst].item<double>()
                                       << " vs expected " << e.flatten()[worst].item<double>() << " (atol " << atol
                                       << ", rtol " << rtol << ", max |diff| "
                                       << (a - e).abs().max().item<double>() << ")";
}

// One training step's backward the way an executor runs it: every stage on a detached
// input under autograd, then backward stage by stage from d_L = 1 (or `seed`),
// accumulating parameter gradients. Returns the chain's output (the loss).
inline at::Tensor staged_forward_backward(const StagedModel& model, const Batch& batch,
                                          const at::Tensor& seed = {}) {
  std::vector<Activation> inputs, outputs;
  Activation a{batch.input};
  for (int i = 0; i < model.num_stages(); ++i) {
    inputs.push_back(detached_leaves(a, /*with_grad=*/i > 0));
    outputs.push_back(model.forward_stage(i, inputs.back(), batch));
    a = outputs.back();
  }
  Activation d{seed.defined() ? seed : at::ones_like(outputs.back().at(0))};
  for (int i = model.num_stages() - 1; i >= 0; --i) d = backward_stage(outputs[i], inputs[i], d);
  return outputs.back().at(0).detach();
}

}  // namespace memopt::model::testing

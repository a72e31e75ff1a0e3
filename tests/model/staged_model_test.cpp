// staged_model_test.cpp: any torch::nn::Sequential becomes a StagedModel whose
// stages, chained, equal the Sequential -- forward, and backward stage by stage.
#include <gtest/gtest.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "model/staged_model.h"
#include "tests/model/test_util.h"

namespace memopt::model {
namespace {

torch::nn::Sequential small_net() {
  at::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::GELU(), torch::nn::LayerNorm(
                                   torch::nn::LayerNormOptions({16})),
                               torch::nn::Linear(16, 16), torch::nn::Tanh(), torch::nn::Linear(16, 4));
}

TEST(StagedModel, FromSequentialNamesOneStagePerChild) {
  torch::nn::Sequential seq = small_net();
  const StagedModel model = StagedModel::from_sequential(seq.ptr());
  ASSERT_EQ(model.num_stages(), 6);
  EXPECT_EQ(model.stage(0).name, "0.Linear");
  EXPECT_EQ(model.stage(1).name, "1.GELU");
  EXPECT_EQ(model.stage(5).name, "5.Linear");
  EXPECT_FALSE(model.ends_with_loss());
  EXPECT_EQ(model.stage(0).parameters.size(), 2u);
  EXPECT_TRUE(model.stage(1).parameters.empty());
  EXPECT_EQ(model.parameters().size(), seq->parameters().size());
  EXPECT_EQ(model.parameter_bytes(), 4 * ((8 * 16 + 16) + 2 * 16 + (16 * 16 + 16) + (16 * 4 + 4)));
}

TEST(StagedModel, ChainedStagesEqualTheSequential) {
  torch::nn::Sequential seq = small_net();
  const StagedModel model = StagedModel::from_sequential(seq.ptr());
  const at::Tensor x = at::randn({5, 8});
  // Same kernels in the same order: bit-identical.
  EXPECT_TRUE(at::equal(model.forward({x, {}}), seq->forward(x)));
}

TEST(StagedModel, StageByStageBackwardEqualsPlainBackward) {
  torch::nn::Sequential seq = small_net();
  StagedModel model = StagedModel::from_sequential(seq.ptr());
  const at::Tensor x = at::randn({5, 8});
  const at::Tensor seed = at::randn({5, 4});

  seq->forward(x).backward(seed);
  std::vector<at::Tensor> plain;
  for (at::Tensor& p : seq->parameters()) {
    plain.push_back(p.grad().clone());
    p.mutable_grad().zero_();
  }
  testing::staged_forward_backward(model, {x, {}}, seed);
  const auto params = seq->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    // The detached boundaries change no arithmetic, only where the graph is cut:
    // identical bits expected.
    EXPECT_TRUE(at::equal(params[k].grad(), plain[k])) << "parameter " << k;
  }
}

TEST(StagedModel, TrainFlagReachesTheModules) {
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::Dropout(0.5));
  StagedModel model = StagedModel::from_sequential(seq.ptr());
  model.train(false);
  EXPECT_FALSE(seq[1]->is_training());
  const at::Tensor x = at::randn({3, 4});
  EXPECT_TRUE(at::equal(model.forward({x, {}}), seq->forward(x)));
  model.train(true);
  EXPECT_TRUE(seq[1]->is_training());
}

TEST(StagedModel, RejectsEmptyModels) {
  EXPECT_THROW(StagedModel::from_sequential(torch::nn::Sequential().ptr()), std::invalid_argument);
}

}  // namespace
}  // namespace memopt::model

// gpt2_hf_test.cpp: memopt's GPT-2, loaded with --hf-dir weights, against Hugging
// Face transformers' GPT2LMHeadModel on the same weights and batch: logits, loss
// and every parameter gradient, for both attention kernels, all three granularities, both
// kernel choices (memopt's fused bias + GELU, or ATen's; dropout is off, so the
// mask-free dropout is the identity here and is tested with dropout on elsewhere) and
// both losses (ATen's, or the chunked one adding wte's gradients into wte.grad).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/gpt2.h"
#include "model/hf_weights.h"
#include "tests/model/gpt2_reference.h"
#include "tests/model/test_util.h"

namespace memopt::model {
namespace {

// Tolerances. Both sides compute in float32 (eps 1.2e-7) with the same formulas but
// different kernels and summation orders (HF's Conv1D is addmm(x, W) where we use
// addmm(x, W^T); sdpa runs a blocked online softmax). Values here are O(1) and every
// reduction is over <= 256 terms, so honest differences stay near 1e-6; a wrong
// op (a missing scale, an untransposed weight, a GELU variant) moves them by 1e-2.
constexpr double kLogitsAtol = 2e-5, kLogitsRtol = 1e-4;
constexpr double kLossAtol = 1e-5, kLossRtol = 1e-5;
// Gradients sum over all B*T positions with cancellation, so small entries carry
// errors relative to the tensor's scale, not their own: atol scales with max |ref|.
constexpr double kGradAtolOfMax = 1e-4, kGradRtol = 1e-3;

// The fused bias + GELU adds the bias inside the activation instead of in addmm and
// uses its own tanhf: a few ulp per element, well inside the tolerances above, which
// both kernel choices share.
class Gpt2VsTransformers
    : public ::testing::TestWithParam<std::tuple<gpt2::Attention, gpt2::Granularity, gpt2::Kernels, gpt2::Loss>> {
 protected:
  void SetUp() override {
    const testing::Reference ref = testing::gpt2_reference();
    if (ref.dir.empty()) GTEST_FAIL() << ref.error;
    dir_ = ref.dir;
    expected_ = read_safetensors(dir_ + "/reference.safetensors");
  }
  std::string dir_;
  std::map<std::string, at::Tensor> expected_;
};

TEST_P(Gpt2VsTransformers, LogitsLossAndGradientsMatch) {
  const auto [attention, granularity, kernels, loss_choice] = GetParam();
  gpt2::Gpt2Spec spec;
  spec.config = read_hf_gpt2_config(dir_);
  spec.config.attention = attention;
  spec.config.granularity = granularity;
  spec.config.kernels = kernels;
  spec.config.loss = loss_choice;
  spec.hf_dir = dir_;
  const at::Tensor ids = expected_.at("input_ids"), targets = expected_.at("targets");
  spec.workload = {ids.size(0), ids.size(1)};
  ASSERT_EQ(spec.config.attn_pdrop, 0.0) << "the reference is made without dropout";

  Gpt2 model = make_gpt2(spec);
  model->train();
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(testing::all_close(model->logits(ids), expected_.at("logits"), kLogitsAtol, kLogitsRtol));
  }
  // The executor's way: stage by stage on detached inputs, into gradients allocated
  // and zeroed beforehand as memopt's trainers keep them (so the chunked loss adds
  // both of wte's gradients in place; its other path is tested in kernel_ops_test).
  for (auto& p : model->parameters()) p.mutable_grad() = at::zeros_like(p);
  const StagedModel staged = stage_gpt2(model);
  const at::Tensor loss = testing::staged_forward_backward(staged, {ids, targets});
  EXPECT_TRUE(testing::all_close(loss.reshape({1}), expected_.at("loss"), kLossAtol, kLossRtol));

  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    SCOPED_TRACE(name);
    const auto it = expected_.find("grad.transformer." + name);
    ASSERT_NE(it, expected_.end());
    at::Tensor ref = it->second;
    const bool conv1d = name.ends_with("c_attn.weight") || name.ends_with("c_proj.weight") ||
                        name.ends_with("c_fc.weight");
    if (conv1d) ref = ref.t();
    ASSERT_TRUE(item.value().grad().defined());
    const double atol = kGradAtolOfMax * ref.abs().max().item<double>();
    EXPECT_TRUE(testing::all_close(item.value().grad(), ref, atol, kGradRtol));
    ++compared;
  }
  EXPECT_EQ(compared, 4 + 12 * spec.config.n_layer);  // wte, wpe, ln_f x2, 12 per block
}

INSTANTIATE_TEST_SUITE_P(
    Gpt2, Gpt2VsTransformers,
    ::testing::Combine(::testing::Values(gpt2::Attention::Explicit, gpt2::Attention::Sdpa),
                       ::testing::Values(gpt2::Granularity::Block, gpt2::Granularity::Sublayer,
                                         gpt2::Granularity::Op),
                       ::testing::Values(gpt2::Kernels::Memopt, gpt2::Kernels::Aten),
                       ::testing::Values(gpt2::Loss::Aten, gpt2::Loss::Chunked)),
    [](const auto& info) {
      return std::string(gpt2::attention_word(std::get<0>(info.param))) + "_" +
             gpt2::granularity_word(std::get<1>(info.param)) + "_" + gpt2::kernels_word(std::get<2>(info.param)) +
             "_" + gpt2::loss_word(std::get<3>(info.param));
    });

TEST(Gpt2, StagesFollowTheGranularity) {
  gpt2::Gpt2Spec spec;
  spec.config.n_layer = 3;
  spec.config.granularity = gpt2::Granularity::Sublayer;
  const StagedModel sub = stage_gpt2(make_gpt2(spec));
  ASSERT_EQ(sub.num_stages(), 2 + 2 * 3);
  EXPECT_EQ(sub.stage(0).name, "embed");
  EXPECT_EQ(sub.stage(1).name, "h.0.attn");
  EXPECT_EQ(sub.stage(2).name, "h.0.mlp");
  EXPECT_EQ(sub.stage(7).name, "head");
  EXPECT_TRUE(sub.ends_with_loss());
  spec.config.granularity = gpt2::Granularity::Block;
  const StagedModel block = stage_gpt2(make_gpt2(spec));
  ASSERT_EQ(block.num_stages(), 2 + 3);
  EXPECT_EQ(block.stage(2).name, "h.1");
  // wte is tied: in the embed and head stages, once in parameters().
  EXPECT_EQ(block.parameters().size(), 4u + 12u * 3u);
  spec.config.granularity = gpt2::Granularity::Op;
  // Explicit attention (the default): the core in two stages.
  const StagedModel op = stage_gpt2(make_gpt2(spec));
  ASSERT_EQ(op.num_stages(), 2 + 9 * 3);
  EXPECT_EQ(op.stage(1).name, "h.0.ln_1");
  EXPECT_EQ(op.stage(3).name, "h.0.attn.softmax");
  EXPECT_EQ(op.stage(4).name, "h.0.attn.mix");
  EXPECT_EQ(op.stage(10).name, "h.1.ln_1");
  EXPECT_EQ(op.stage(3).role, solver::StageRole::AttentionCore);
  EXPECT_EQ(op.stage(4).role, solver::StageRole::AttentionCore);
  EXPECT_EQ(op.stage(8).role, solver::StageRole::Pointwise);  // h.0.mlp.gelu
  EXPECT_EQ(op.stage(7).role, solver::StageRole::Other);      // h.0.mlp.c_fc
  EXPECT_EQ(op.parameters().size(), 4u + 12u * 3u);
  // Each parameter once in the stage that reads it first, but c_fc's bias, which the
  // fused GELU reads after c_fc: the same set as the block stages'.
  EXPECT_EQ(parameter_homes(op).homed[7].size(), 2u);  // c_fc's weight and bias
  spec.config.attention = gpt2::Attention::Sdpa;
  const StagedModel op_sdpa = stage_gpt2(make_gpt2(spec));
  ASSERT_EQ(op_sdpa.num_stages(), 2 + 8 * 3);
  EXPECT_EQ(op_sdpa.stage(3).name, "h.0.attn.core");
  EXPECT_EQ(op_sdpa.stage(3).role, solver::StageRole::AttentionCore);
  EXPECT_EQ(op_sdpa.stage(9).name, "h.1.ln_1");
}

// Note [Multi-tensor activations]: operator stages run the block's own ops, and a
// carried tensor's gradient goes straight to the input's. So whole-chain training at
// operator granularity gives block training's loss and gradients bit for bit, with
// dropout on (the masks are drawn in the same order), for both attention kernels
// and both kernel choices. The reference is the block model, not the op stages.
TEST(Gpt2, OperatorStagesTrainExactlyAsBlocks) {
  for (const gpt2::Attention attention : {gpt2::Attention::Explicit, gpt2::Attention::Sdpa}) {
    for (const gpt2::Kernels kernels : {gpt2::Kernels::Memopt, gpt2::Kernels::Aten}) {
      SCOPED_TRACE(std::string(gpt2::attention_word(attention)) + " " + gpt2::kernels_word(kernels));
      gpt2::Gpt2Spec spec;
      spec.config.n_layer = 2;
      spec.config.set_dropout(0.1);
      spec.config.attention = attention;
      spec.config.kernels = kernels;
      spec.workload = {2, 32};
      const Batch batch = make_gpt2_batch(spec);
      auto train = [&](gpt2::Granularity granularity) {
        spec.config.granularity = granularity;
        const StagedModel model = stage_gpt2(make_gpt2(spec));  // same seed: same weights
        at::manual_seed(5);
        const at::Tensor loss = model.forward(batch);
        loss.backward();
        std::vector<at::Tensor> out{loss.detach()};
        for (const at::Tensor& p : model.parameters()) out.push_back(p.grad());
        return out;
      };
      const std::vector<at::Tensor> block = train(gpt2::Granularity::Block);
      const std::vector<at::Tensor> op = train(gpt2::Granularity::Op);
      ASSERT_EQ(block.size(), op.size());
      for (size_t k = 0; k < block.size(); ++k) EXPECT_TRUE(at::equal(block[k], op[k])) << "tensor " << k;
      // The stage-by-stage backward of the executor, carried gradients handed over.
      spec.config.granularity = gpt2::Granularity::Op;
      const StagedModel staged = stage_gpt2(make_gpt2(spec));
      at::manual_seed(5);
      const at::Tensor loss = testing::staged_forward_backward(staged, batch);
      EXPECT_TRUE(at::equal(loss, block[0]));
      const std::vector<at::Tensor> params = staged.parameters();
      for (size_t k = 0; k < params.size(); ++k)
        EXPECT_TRUE(at::equal(params[k].grad(), block[k + 1])) << "parameter " << k;
    }
  }
}

TEST(Gpt2, SameSeedSameWeightsAndDropoutFollowsTheGlobalRng) {
  gpt2::Gpt2Spec spec;
  spec.config.set_dropout(0.1);
  const StagedModel a = stage_gpt2(make_gpt2(spec)), b = stage_gpt2(make_gpt2(spec));
  const Batch batch = make_gpt2_batch(spec);
  at::manual_seed(11);
  const at::Tensor la = a.forward(batch);
  at::manual_seed(11);
  const at::Tensor lb = b.forward(batch);
  EXPECT_TRUE(at::equal(la, lb));  // one thread, same kernels, same masks: same bits
  const at::Tensor lc = b.forward(batch);
  EXPECT_FALSE(at::equal(la, lc));  // dropout is on
}

TEST(Gpt2, RejectsHeadsThatDoNotDivideTheWidth) {
  gpt2::Gpt2Spec spec;
  spec.config.n_embd = 100;
  spec.config.n_head = 3;
  EXPECT_THROW(make_gpt2(spec), std::invalid_argument);
  EXPECT_NE(gpt2::validate(spec.config).find("not divisible"), std::string::npos);
}

}  // namespace
}  // namespace memopt::model

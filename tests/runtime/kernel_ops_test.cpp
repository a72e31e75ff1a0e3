// kernel_ops_test.cpp: the LibTorch adapter of kernels/ (model/kernel_ops.h) --
// autograd through the mask-free dropout, the fused bias + GELU and the chunked
// linear cross-entropy against ATen's composed ops, the dropout key's tie to the
// global generator, and tensor packing.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include "kernels/cpu/reference.h"
#include "measure/cpu_allocator.h"
#include "model/kernel_ops.h"
#include "runtime/executor.h"
#include "tests/model/test_util.h"

namespace memopt::runtime {
namespace {

TEST(PhiloxDropout, ForwardAndBackwardUseTheKeysMask) {
  const at::Tensor x = at::randn({3, 5, 7}).requires_grad_(true);
  const kernels::DropoutKey key{0x5eed, 0};
  const double p = 0.3;
  const at::Tensor y = model::philox_dropout(x, p, key);
  const std::vector<uint8_t> mask = kernels::reference::dropout_mask(x.numel(), p, key);
  const at::Tensor m = at::from_blob(const_cast<uint8_t*>(mask.data()), x.sizes(), at::kByte).to(at::kFloat);
  const float scale = 1.0f / (1.0f - static_cast<float>(p));
  // Exact: one float multiply per element on both sides.
  EXPECT_TRUE(at::equal(y, x.detach() * m * scale));
  const at::Tensor dy = at::randn_like(y);
  y.backward(dy);
  EXPECT_TRUE(at::equal(x.grad(), dy * m * scale));
}

TEST(PhiloxDropout, IdentityWhenOffOrEvaluating) {
  const at::Tensor x = at::randn({4, 4});
  EXPECT_TRUE(model::philox_dropout(x, 0.0, true).is_same(x));
  EXPECT_TRUE(model::philox_dropout(x, 0.5, false).is_same(x));
  EXPECT_THROW(model::philox_dropout(x.to(at::kDouble), 0.5, true), std::invalid_argument);
}

// Note [Dropout key from the global generator]: restoring the generator's state
// reproduces the mask; not restoring it draws a new one.
TEST(PhiloxDropout, MaskFollowsTheGlobalGeneratorState) {
  const at::Tensor x = at::ones({1000});
  const CpuRngState state = cpu_rng_state();
  const at::Tensor first = model::philox_dropout(x, 0.5, true);
  const at::Tensor second = model::philox_dropout(x, 0.5, true);
  set_cpu_rng_state(state);
  const at::Tensor again = model::philox_dropout(x, 0.5, true);
  EXPECT_TRUE(at::equal(first, again));
  EXPECT_FALSE(at::equal(first, second));
}

// What a forward leaves alive besides its output, measured by the counting
// allocator: ATen's native_dropout keeps its 1-byte mask, ours nothing.
TEST(PhiloxDropout, SavesNoMaskUnlikeNativeDropout) {
  measure::CpuMemoryMeter meter;
  const at::Tensor x = at::randn({64, 1000}).requires_grad_(true);
  auto kept_besides_output = [&](auto&& dropout) {
    const int64_t before = meter.current_bytes();
    const at::Tensor y = dropout();
    return meter.current_bytes() - before - static_cast<int64_t>(y.nbytes());
  };
  EXPECT_EQ(kept_besides_output([&] { return std::get<0>(at::native_dropout(x, 0.1, true)); }), x.numel());
  EXPECT_EQ(kept_besides_output([&] { return model::philox_dropout(x, 0.1, true); }), 0);
  // And it allocates nothing but its output on the way (gpt2/analytic.cpp).
  const int64_t before = meter.current_bytes();
  meter.reset_peak();
  const at::Tensor y = model::philox_dropout(x, 0.1, true);
  EXPECT_EQ(meter.peak_bytes() - before, static_cast<int64_t>(y.nbytes()));
}

// Tolerances against ATen's gelu(h + b, "tanh") and its autograd, both float32:
// values agree to a few ulp (rtol 1e-5, atol 1e-6 as in tests/kernels). ATen's
// gradient evaluates 0.5 z (1 - t^2) k (1 + 3c z^2) with t = tanh(u) in float, so
// where t rounds near -1 (z around -4..-5) 1 - t^2 keeps only ulp(1) = 1.2e-7 and
// the product errs by up to 0.5 |z| k (1 + 3c z^2) ulp(1) |dy| ~ 2e-6 for |dy| <= 4
// (ours, through exp, does not cancel: tests/kernels holds it to the double
// reference at 1e-6): atol 1e-5 for h's gradient. The bias gradient sums 4096 rows
// in different orders (ATen in float, ours in double): atol 1e-4.
TEST(BiasGelu, MatchesAtenComposedForwardAndBackward) {
  const at::Tensor h = (3 * at::randn({8, 512, 64})).requires_grad_(true);
  const at::Tensor b = at::randn({64}).requires_grad_(true);
  const at::Tensor h2 = h.detach().clone().requires_grad_(true), b2 = b.detach().clone().requires_grad_(true);
  const at::Tensor ours = model::bias_gelu(h, b);
  const at::Tensor ref = at::gelu(h2 + b2, "tanh");
  EXPECT_TRUE(model::testing::all_close(ours, ref, 1e-6, 1e-5));
  const at::Tensor dy = at::randn_like(ours);
  ours.backward(dy);
  ref.backward(dy);
  EXPECT_TRUE(model::testing::all_close(h.grad(), h2.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(model::testing::all_close(b.grad(), b2.grad(), 1e-4, 1e-5));
}

// Against HF's NewGELUActivation, the composed form GPT-2 was written in, in double
// (the reference the float results are judged by).
TEST(BiasGelu, MatchesComposedGeluInDouble) {
  const at::Tensor h = 3 * at::randn({256, 48}), b = at::randn({48});
  const at::Tensor z = (h + b).to(at::kDouble);
  const at::Tensor ref = 0.5 * z * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * at::pow(z, 3.0))));
  EXPECT_TRUE(model::testing::all_close(model::bias_gelu(h, b), ref, 1e-6, 1e-5));
  EXPECT_THROW(model::bias_gelu(h, at::randn({47})), std::invalid_argument);
}

TEST(PackTensors, ExactRoundTripOfMixedAndStridedTensors) {
  const std::vector<at::Tensor> group = {at::randn({5, 7}).t(), at::randint(1000, {13}, at::kLong),
                                         at::rand({9}) > 0.5, at::randn({0})};
  const model::PackedTensors packed = model::pack_tensors(group);
  EXPECT_EQ(packed.buffer.numel(), packed.layout.total_bytes);
  const std::vector<at::Tensor> back = model::unpack_tensors(packed);
  ASSERT_EQ(back.size(), group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    EXPECT_EQ(back[i].scalar_type(), group[i].scalar_type());
    EXPECT_TRUE(at::equal(back[i], group[i])) << "tensor " << i;
  }
}

TEST(PackTensors, Bf16IsLossyWithinItsBound) {
  const at::Tensor x = at::randn({1000}) * 100;
  const model::PackedTensors packed = model::pack_tensors({x}, kernels::PackFormat::Bf16Lossy);
  const at::Tensor back = model::unpack_tensors(packed)[0];
  // Round to nearest with 8 significant bits: |error| <= 2^-8 |x|; and ATen's own
  // bfloat16 conversion (also nearest-even) gives the same values.
  EXPECT_TRUE(((back - x).abs() <= x.abs() * std::ldexp(1.0, -8)).all().item<bool>());
  EXPECT_TRUE(at::equal(back, x.to(at::kBFloat16).to(at::kFloat)));
}

// Against ATen's linear + cross_entropy (mean, ignore_index -100), loss and both
// gradients, for chunkings that divide neither N = 21 nor V = 101. fp32 matmuls summed
// in another order and exp/log in float: 1e-5 absolute plus 1e-4 relative per element.
TEST(ChunkedLinearCrossEntropy, LossAndGradientsEqualAten) {
  at::manual_seed(11);
  const at::Tensor h0 = at::randn({3, 7, 16}), w0 = at::randn({101, 16}) * 0.5;
  at::Tensor t = at::randint(0, 101, {3, 7}, at::kLong);
  t.index_put_({0, 2}, -100);
  t.index_put_({2, 6}, -100);
  const auto close = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a - b).abs() <= 1e-5 + 1e-4 * b.abs()).all().item<bool>();
  };
  const at::Tensor hr = h0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
  const at::Tensor ref = at::cross_entropy_loss(at::linear(hr, wr).reshape({-1, 101}), t.reshape({-1}));
  (ref * 0.7).backward();
  for (const auto& [rows, block] : {std::pair<int64_t, int64_t>{4, 10}, {5, 33}, {100, 1000}, {1, 1}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(block));
    const at::Tensor h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    const at::Tensor loss = model::chunked_linear_cross_entropy(h, w, t, rows, block);
    EXPECT_TRUE(close(loss, ref.detach())) << loss.item<float>() << " vs " << ref.item<float>();
    (loss * 0.7).backward();
    EXPECT_TRUE(close(h.grad(), hr.grad()));
    EXPECT_TRUE(close(w.grad(), wr.grad()));
    // Note [Gradients into .grad]: with w.grad already there, the weight's gradient
    // is added into it, and the sum is the same.
    const at::Tensor before = at::randn_like(w0);
    const at::Tensor w2 = w0.clone().requires_grad_(true);
    w2.mutable_grad() = before.clone();
    const at::Tensor grad_storage = w2.grad();
    (model::chunked_linear_cross_entropy(h0, w2, t, rows, block) * 0.7).backward();
    EXPECT_TRUE(w2.grad().is_same(grad_storage)) << "the gradient was not added in place";
    EXPECT_TRUE(close(w2.grad(), before + wr.grad()));
  }
}

// at::embedding's gradient scatters rows into a zeroed V x C tensor; embedding_into_grad
// adds them into weight.grad when it exists (repeated ids included) and otherwise
// returns the same gradient. The sums are of the same terms in another order.
TEST(EmbeddingIntoGrad, GradientEqualsAtenAndGoesIntoGradInPlace) {
  at::manual_seed(12);
  const int64_t V = 50, C = 8;
  const at::Tensor w0 = at::randn({V, C});
  const at::Tensor ids = at::tensor({3, 7, 3, 49, 0, 3}, at::kLong).reshape({2, 3});
  const at::Tensor dy = at::randn({2, 3, C});
  const at::Tensor wr = w0.clone().requires_grad_(true);
  at::embedding(wr, ids).backward(dy);
  const at::Tensor w1 = w0.clone().requires_grad_(true);
  const at::Tensor y = model::embedding_into_grad(w1, ids);
  EXPECT_TRUE(at::equal(y, at::embedding(w0, ids)));
  y.backward(dy);
  EXPECT_TRUE(at::allclose(w1.grad(), wr.grad(), 0, 1e-6));
  const at::Tensor before = at::randn_like(w0);
  const at::Tensor w2 = w0.clone().requires_grad_(true);
  w2.mutable_grad() = before.clone();
  const at::Tensor grad_storage = w2.grad();
  measure::CpuMemoryMeter meter;
  const at::Tensor y2 = model::embedding_into_grad(w2, ids);
  meter.reset_peak();
  const int64_t before_bwd = meter.current_bytes();
  y2.backward(dy);
  EXPECT_LT(meter.peak_bytes() - before_bwd, V * C * 4) << "a V x C gradient was allocated";
  EXPECT_TRUE(w2.grad().is_same(grad_storage));
  EXPECT_TRUE(at::allclose(w2.grad(), before + wr.grad(), 0, 1e-6));
}

// The forward keeps one float per row besides its inputs, and no more than one block
// of logits is ever alive: measured by the counting allocator, not by reading the code.
TEST(ChunkedLinearCrossEntropy, HoldsOneBlockOfLogitsAndKeepsOneFloatPerRow) {
  const int64_t N = 64, C = 32, V = 5000, rows = 16, block = 1000;
  const at::Tensor h = at::randn({N, C}).requires_grad_(true), w = at::randn({V, C}).requires_grad_(true);
  const at::Tensor t = at::randint(0, V, {N}, at::kLong);
  measure::CpuMemoryMeter meter;
  const int64_t before = meter.current_bytes();
  meter.reset_peak();
  at::Tensor loss = model::chunked_linear_cross_entropy(h, w, t, rows, block);
  const int64_t kept = meter.current_bytes() - before, peak = meter.peak_bytes() - before;
  // lse (N floats), the row count and the loss (one float each), and 64-byte-rounded nothing else.
  EXPECT_LE(kept, N * 4 + 2 * 4 + 256);
  // One block of logits plus the running max, sum, target logit and row losses.
  EXPECT_LE(peak, rows * block * 4 + 5 * N * 4 + 1024);
  EXPECT_LT(peak, N * V * 4 / 4);  // far below the logits of every row
  meter.reset_peak();
  const int64_t before_bwd = meter.current_bytes();
  loss.backward();
  // Backward: the gradients it returns (N x C and V x C) and one block of logits.
  EXPECT_LE(meter.peak_bytes() - before_bwd, (N * C + V * C) * 4 + rows * block * 4 + 1024);
  // With w.grad there (Note [Gradients into .grad]), no V x C gradient is made.
  at::Tensor loss2 = model::chunked_linear_cross_entropy(h, w, t, rows, block);
  meter.reset_peak();
  const int64_t before_bwd2 = meter.current_bytes();
  loss2.backward();
  EXPECT_LE(meter.peak_bytes() - before_bwd2, N * C * 4 + rows * block * 4 + 1024);
}

TEST(ChunkedLinearCrossEntropy, RefusesShapesAndTypesNamingThem) {
  const at::Tensor h = at::randn({4, 8}), w = at::randn({10, 8}), t = at::zeros({4}, at::kLong);
  EXPECT_THROW(model::chunked_linear_cross_entropy(h, at::randn({10, 9}), t, 2, 4), std::invalid_argument);
  EXPECT_THROW(model::chunked_linear_cross_entropy(h, w, at::zeros({4}, at::kInt), 2, 4), std::invalid_argument);
  EXPECT_THROW(model::chunked_linear_cross_entropy(h.to(at::kDouble), w, t, 2, 4), std::invalid_argument);
  EXPECT_THROW(model::chunked_linear_cross_entropy(h, w, t, 0, 10), std::invalid_argument);
}

}  // namespace
}  // namespace memopt::runtime

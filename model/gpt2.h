// gpt2.h: GPT-2 (Radford et al. 2019) in LibTorch, following the original code and
// Hugging Face's GPT2LMHeadModel op for op, and its cut into stages for StagedModel.
// Parameter names match Hugging Face's without the "transformer." prefix
// ("h.0.attn.c_attn.weight"), but Linear weights are [out, in] as in nn.Linear.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "gpt2/config.h"
#include "model/staged_model.h"

namespace memopt::model {

// Causal self-attention with its output projection and residual dropout (the
// residual add itself belongs to the block).
class Gpt2AttentionImpl : public torch::nn::Module {
 public:
  explicit Gpt2AttentionImpl(const gpt2::Gpt2Config& config);
  at::Tensor forward(at::Tensor x);  // (B, T, C) -> (B, T, C); by value: Note [Tensor lifetimes]
  // forward's three parts, the operator stages of Note [Operator stages] in gpt2/stages.h:
  // (B, T, C) -> qkv in the layout the core reads (Note [Head-major qkv]): (3, B, H, T, D)
  // with explicit attention, c_attn's (B, T, 3C) with sdpa.
  at::Tensor qkv(const at::Tensor& h);
  at::Tensor core(at::Tensor qkv);     // attention, heads merged: qkv -> (B, T, C)
  at::Tensor project(at::Tensor y);    // c_proj and its dropout
  // Explicit attention's core in two operator stages: softmax(mask(q k^T / sqrt(D)))
  // from the head-major qkv, and dropout, @ v, heads merged. core() is the same ops on
  // one unbind of qkv, so that a block's graph does not change.
  at::Tensor softmax_stage(const at::Tensor& qkv);                 // -> (B, H, T, T)
  at::Tensor mix_stage(at::Tensor probs, const at::Tensor& qkv);  // -> (B, T, C)

  torch::nn::Linear c_attn{nullptr};  // C -> 3C: q, k, v side by side
  torch::nn::Linear c_proj{nullptr};  // C -> C

 private:
  at::Tensor probabilities(at::Tensor q, at::Tensor k);                // (B, H, T, D) heads -> (B, H, T, T)
  at::Tensor weigh_values(at::Tensor probs, const at::Tensor& v);    // dropout, @ v -> (B, H, T, D)

  gpt2::Gpt2Config config_;
  at::Tensor future_mask_;  // (n_positions, n_positions) bool, true above the diagonal
};
TORCH_MODULE(Gpt2Attention);

class Gpt2MlpImpl : public torch::nn::Module {
 public:
  explicit Gpt2MlpImpl(const gpt2::Gpt2Config& config);
  at::Tensor forward(at::Tensor x);  // C -> 4C -> tanh-GELU -> C -> dropout
  // forward's three parts, the operator stages: c_fc (without its bias when the fused
  // bias + GELU kernel adds it), the GELU, c_proj with its dropout.
  at::Tensor fc(const at::Tensor& h);
  at::Tensor gelu(const at::Tensor& u);
  at::Tensor project(at::Tensor g);

  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};

 private:
  double resid_pdrop_;
  gpt2::Kernels kernels_;
};
TORCH_MODULE(Gpt2Mlp);

// Pre-LN block. Each half is x + f(ln(x)), so the residual stream alone carries
// everything from one half to the next: a sublayer stage needs no tuple.
class Gpt2BlockImpl : public torch::nn::Module {
 public:
  explicit Gpt2BlockImpl(const gpt2::Gpt2Config& config);
  at::Tensor attention_half(const at::Tensor& x);  // x + attn(ln_1(x))
  at::Tensor mlp_half(const at::Tensor& x);        // x + mlp(ln_2(x))
  at::Tensor forward(const at::Tensor& x) { return mlp_half(attention_half(x)); }
  // The residual add that ends each half: x + r.
  static at::Tensor residual_add(const at::Tensor& x, const at::Tensor& r) { return x + r; }

  torch::nn::LayerNorm ln_1{nullptr};
  Gpt2Attention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  Gpt2Mlp mlp{nullptr};
};
TORCH_MODULE(Gpt2Block);

class Gpt2Impl : public torch::nn::Module {
 public:
  // GPT-2's init from a private generator seeded with `seed` (the global RNG, which
  // dropout uses, is left alone): N(0, 0.02) for weights and embeddings,
  // N(0, 0.02 / sqrt(2 n_layer)) for both c_proj weights, zero biases, unit LayerNorms.
  Gpt2Impl(const gpt2::Gpt2Config& config, uint64_t seed);

  at::Tensor embed(const at::Tensor& ids);                              // (B, T) int64 -> (B, T, C)
  at::Tensor head_logits(const at::Tensor& x);                          // ln_f, tied lm_head -> (B, T, V)
  at::Tensor head_loss(const at::Tensor& x, const at::Tensor& targets); // mean cross-entropy, a scalar
  at::Tensor logits(const at::Tensor& ids);                             // the whole model

  const gpt2::Gpt2Config& config() const { return config_; }
  Gpt2Block block(int64_t i) const { return blocks_.at(static_cast<size_t>(i)); }

  torch::nn::Embedding wte{nullptr};  // also the LM head's weight (tied)
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  gpt2::Gpt2Config config_;
  std::vector<Gpt2Block> blocks_;  // the same modules as h, typed
};
TORCH_MODULE(Gpt2);

// Cuts `model` into stages as its config's granularity says (see Granularity):
// "embed", "h.<i>" or "h.<i>.attn" + "h.<i>.mlp", and "head", which returns the loss.
StagedModel stage_gpt2(Gpt2 model);

// The model a spec describes: random init from spec.seed, or spec.hf_dir's weights.
Gpt2 make_gpt2(const gpt2::Gpt2Spec& spec);
// B sequences of T random tokens (from spec.seed) and their next tokens as targets.
Batch make_gpt2_batch(const gpt2::Gpt2Spec& spec);

}  // namespace memopt::model

// gpt2.cpp: GPT-2's modules, its init, its stages and its synthetic batch.
// Each forward is written op by op with gpt2/analytic.cpp in mind: that file
// derives every stage's saved and output bytes from exactly these ops, so change
// both together (tests/profiler checks them against measurement).
#include "model/gpt2.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/hf_weights.h"
#include "model/kernel_ops.h"

namespace memopt::model {
namespace {

// Note [Tensor lifetimes]
// The forwards drop every local the moment it is dead (by value parameters that are
// reset, reassignment, scopes), so that without grad -- fwd_ckpt and fwd_drop -- a
// stage holds only what the current op reads; under autograd the graph keeps what
// backward needs anyway. gpt2/analytic.cpp replays these lifetimes.

// Note [Dropout kernel]
// at::dropout on CPU keeps a float noise tensor (4 bytes per element) for backward;
// at::native_dropout keeps a bool mask (1 byte), as CUDA's fused kernel does and as
// the activation-memory analyses (Korthikanti et al. 2022) assume. Since the CPU
// plays the GPU here, use native_dropout. With Kernels::Memopt, kernels/dropout.h
// keeps no mask at all (Note [Kernel choice]). All draw from the global CPU
// generator, so a recompute that restores its state reproduces the mask. p = 0 and
// eval mode return the input itself: no kernel, no mask.
at::Tensor apply_dropout(const at::Tensor& x, double p, bool training, gpt2::Kernels kernels) {
  if (!training || p == 0.0) return x;
  if (kernels == gpt2::Kernels::Memopt) return philox_dropout(x, p, training);
  return std::get<0>(at::native_dropout(x, p, /*train=*/true));
}

torch::nn::Linear linear(int64_t in, int64_t out, bool bias = true) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

torch::nn::LayerNorm layer_norm(const gpt2::Gpt2Config& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(c.layer_norm_epsilon));
}

}  // namespace

Gpt2AttentionImpl::Gpt2AttentionImpl(const gpt2::Gpt2Config& config) : config_(config) {
  c_attn = register_module("c_attn", linear(config.n_embd, 3 * config.n_embd));
  c_proj = register_module("c_proj", linear(config.n_embd, config.n_embd));
  // A buffer, built once: a mask made per forward would be saved by masked_fill and
  // count as an activation.
  future_mask_ = register_buffer(
      "future_mask", at::ones({config.n_positions, config.n_positions}, at::kBool).triu(1));
}

at::Tensor Gpt2AttentionImpl::forward(at::Tensor x) {
  const int64_t B = x.size(0), T = x.size(1), C = config_.n_embd;
  const int64_t H = config_.n_head, D = config_.head_dim();
  at::Tensor q, k, v;  // (B, H, T, D) views into c_attn's (B, T, 3C) output
  {
    const std::vector<at::Tensor> qkv = c_attn(x).split(C, /*dim=*/2);
    x.reset();  // Note [Tensor lifetimes]
    q = qkv[0].view({B, T, H, D}).transpose(1, 2);
    k = qkv[1].view({B, T, H, D}).transpose(1, 2);
    v = qkv[2].view({B, T, H, D}).transpose(1, 2);
  }
  at::Tensor y;
  if (config_.attention == gpt2::Attention::Explicit) {
    at::Tensor att = at::matmul(q, k.transpose(-2, -1));  // (B, H, T, T)
    q.reset();
    k.reset();
    // In place: neither the matmul nor the scaling saves these scores for backward.
    att.mul_(1.0 / std::sqrt(static_cast<double>(D)));
    att.masked_fill_(future_mask_.narrow(0, 0, T).narrow(1, 0, T), -std::numeric_limits<float>::infinity());
    att = at::softmax(att, -1);
    att = apply_dropout(att, config_.attn_pdrop, is_training(), config_.kernels);
    y = at::matmul(att, v);  // (B, H, T, D)
  } else {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, is_training() ? config_.attn_pdrop : 0.0,
                                         /*is_causal=*/true);
  }
  q.reset();
  k.reset();
  v.reset();
  y = y.transpose(1, 2).contiguous().view({B, T, C});
  y = c_proj(y);
  return apply_dropout(y, config_.resid_pdrop, is_training(), config_.kernels);
}

Gpt2MlpImpl::Gpt2MlpImpl(const gpt2::Gpt2Config& config) : resid_pdrop_(config.resid_pdrop), kernels_(config.kernels) {
  c_fc = register_module("c_fc", linear(config.n_embd, 4 * config.n_embd));
  c_proj = register_module("c_proj", linear(4 * config.n_embd, config.n_embd));
}

at::Tensor Gpt2MlpImpl::forward(at::Tensor x) {
  if (kernels_ == gpt2::Kernels::Memopt) {
    x = at::linear(x, c_fc->weight);  // the bias is added inside the fused GELU
    x = bias_gelu(x, c_fc->bias);
  } else {
    x = c_fc(x);
    x = at::gelu(x, "tanh");  // GPT-2's "gelu_new" is the tanh approximation
  }
  x = c_proj(x);
  // The parameter x would otherwise live until the end of the caller's full
  // expression, through the residual add (Note [Tensor lifetimes]).
  at::Tensor out = apply_dropout(x, resid_pdrop_, is_training(), kernels_);
  x.reset();
  return out;
}

Gpt2BlockImpl::Gpt2BlockImpl(const gpt2::Gpt2Config& config) {
  ln_1 = register_module("ln_1", layer_norm(config));
  attn = register_module("attn", Gpt2Attention(config));
  ln_2 = register_module("ln_2", layer_norm(config));
  mlp = register_module("mlp", Gpt2Mlp(config));
}

at::Tensor Gpt2BlockImpl::attention_half(const at::Tensor& x) { return x + attn->forward(ln_1(x)); }
at::Tensor Gpt2BlockImpl::mlp_half(const at::Tensor& x) { return x + mlp->forward(ln_2(x)); }

Gpt2Impl::Gpt2Impl(const gpt2::Gpt2Config& config, uint64_t seed) : config_(config) {
  if (std::string e = gpt2::validate(config); !e.empty()) throw std::invalid_argument("gpt2: " + e);
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config.n_positions, config.n_embd));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks_.emplace_back(config);
    h->push_back(blocks_.back());
  }
  ln_f = register_module("ln_f", layer_norm(config));

  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  wte->weight.normal_(0.0, std, gen);
  wpe->weight.normal_(0.0, std, gen);
  for (const Gpt2Block& b : blocks_) {
    for (const torch::nn::Linear& l : {b->attn->c_attn, b->attn->c_proj, b->mlp->c_fc, b->mlp->c_proj}) {
      const bool is_proj = l.get() == b->attn->c_proj.get() || l.get() == b->mlp->c_proj.get();
      l->weight.normal_(0.0, is_proj ? proj_std : std, gen);
      l->bias.zero_();
    }
  }
  // LayerNorm's own init is already weight 1, bias 0.
}

at::Tensor Gpt2Impl::embed(const at::Tensor& ids) {
  // Slicing wpe instead of looking up arange(T) gives the same values without an
  // index tensor that the lookup would save for backward.
  // Note [Loss choice]: the chunked loss also adds the lookup's gradient into wte.grad.
  // (One expression each, so that the operands are evaluated as Note [Embedding
  // operand order] in gpt2/analytic.cpp says.)
  const at::Tensor x = config_.loss == gpt2::Loss::Chunked
                           ? embedding_into_grad(wte->weight, ids) + wpe->weight.narrow(0, 0, ids.size(1))
                           : at::embedding(wte->weight, ids) + wpe->weight.narrow(0, 0, ids.size(1));
  return apply_dropout(x, config_.embd_pdrop, is_training(), config_.kernels);
}

at::Tensor Gpt2Impl::head_logits(const at::Tensor& x) { return at::linear(ln_f(x), wte->weight); }

at::Tensor Gpt2Impl::head_loss(const at::Tensor& x, const at::Tensor& targets) {
  if (!targets.defined()) throw std::invalid_argument("gpt2 head: the batch has no targets");
  // Note [Loss choice]
  if (config_.loss == gpt2::Loss::Chunked)
    return chunked_linear_cross_entropy(ln_f(x), wte->weight, targets, gpt2::kChunkedLossRows,
                                        gpt2::kChunkedLossVocabBlock);
  // Cross-entropy as its two ops, so that the (N, V) logits die as soon as
  // log_softmax has read them instead of living through nll_loss.
  const at::Tensor logp = at::log_softmax(head_logits(x).view({-1, config_.vocab_size}), -1);
  return at::nll_loss(logp, targets.reshape({-1}));
}

at::Tensor Gpt2Impl::logits(const at::Tensor& ids) {
  at::Tensor x = embed(ids);
  for (const Gpt2Block& b : blocks_) x = b.ptr()->forward(x);
  return head_logits(x);
}

StagedModel stage_gpt2(Gpt2 model) {
  Gpt2Impl* m = model.get();  // kept alive by the StagedModel's owner
  if (m->config().granularity == gpt2::Granularity::Op)
    throw std::invalid_argument(
        "gpt2: --granularity op is modeled (memopt estimate) but not yet run: its stages pass the residual stream "
        "beside their outputs, which the runtime's one-tensor stages cannot; profile and run with --granularity "
        "block or sublayer");
  std::vector<Stage> stages;
  stages.push_back({"embed", [m](const at::Tensor& ids, const Batch&) { return m->embed(ids); },
                    {m->wte->weight, m->wpe->weight}});
  auto params_of = [](std::initializer_list<const torch::nn::Module*> modules) {
    std::vector<at::Tensor> out;
    for (const torch::nn::Module* mod : modules)
      for (const at::Tensor& p : mod->parameters()) out.push_back(p);
    return out;
  };
  for (int64_t i = 0; i < m->config().n_layer; ++i) {
    Gpt2BlockImpl* b = m->block(i).get();
    const std::string name = "h." + std::to_string(i);
    if (m->config().granularity == gpt2::Granularity::Block) {
      stages.push_back({name, [b](const at::Tensor& x, const Batch&) { return b->forward(x); }, b->parameters()});
    } else {
      stages.push_back({name + ".attn", [b](const at::Tensor& x, const Batch&) { return b->attention_half(x); },
                        params_of({b->ln_1.get(), b->attn.get()})});
      stages.push_back({name + ".mlp", [b](const at::Tensor& x, const Batch&) { return b->mlp_half(x); },
                        params_of({b->ln_2.get(), b->mlp.get()})});
    }
  }
  std::vector<at::Tensor> head_params = params_of({m->ln_f.get()});
  head_params.push_back(m->wte->weight);  // tied lm_head
  stages.push_back({"head", [m](const at::Tensor& x, const Batch& batch) { return m->head_loss(x, batch.targets); },
                    std::move(head_params)});
  return StagedModel(std::move(stages), model.ptr(), /*ends_with_loss=*/true);
}

Gpt2 make_gpt2(const gpt2::Gpt2Spec& spec) {
  Gpt2 model(spec.config, spec.seed);
  if (!spec.hf_dir.empty()) load_hf_gpt2_weights(*model, spec.hf_dir);
  return model;
}

Batch make_gpt2_batch(const gpt2::Gpt2Spec& spec) {
  const int64_t B = spec.workload.batch, T = spec.workload.seq_len;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(spec.seed + 1);
  const at::Tensor tokens = at::randint(spec.config.vocab_size, {B, T + 1}, gen, at::kLong);
  // clone, not contiguous(): with B = 1 the slices are already contiguous views and
  // would keep the whole (B, T + 1) storage alive as a_0.
  return {tokens.narrow(1, 0, T).clone(), tokens.narrow(1, 1, T).clone()};
}

}  // namespace memopt::model

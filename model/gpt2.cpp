// gpt2.cpp: GPT-2's modules, its init, its stages and its synthetic batch.
// Each forward is written op by op with gpt2/analytic.cpp in mind: that file
// derives every stage's saved and output bytes from exactly these ops, so change
// both together (tests/profiler checks them against measurement).
#include "model/gpt2.h"

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "gpt2/stages.h"
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
  at::Tensor h = qkv(x);
  x.reset();  // Note [Tensor lifetimes]
  return project(core(std::move(h)));
}

// Note [Head-major qkv]
// Explicit attention's matmuls need q, k and v as (B, H, T, D) operands that reshape
// to (B*H, T, D) without a copy. Viewed out of c_attn's (B, T, 3C) output they do
// not, and each matmul saves a contiguous copy of its operand for backward, while the
// (B, T, 3C) output itself lives on as long as anything still views it. Within a block
// it dies young; at operator granularity it is a stage boundary, kept beside the
// copies: 3C floats per token more than the block keeps. So with explicit attention
// qkv() copies c_attn's output once into (3, B, H, T, D), and q, k, v are its three
// contiguous slices, which the matmuls save as they are: the block and its operator
// stages keep the same bytes, and recomputing the softmax stage makes no copies.
// sdpa reads q, k, v as (B, H, T, D) views of c_attn's output and saves the views,
// copy-free: its qkv stays c_attn's output.
at::Tensor Gpt2AttentionImpl::qkv(const at::Tensor& h) {
  at::Tensor out = c_attn(h);
  if (config_.attention != gpt2::Attention::Explicit) return out;
  const int64_t B = out.size(0), T = out.size(1), H = config_.n_head, D = config_.head_dim();
  return out.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4}).contiguous();
}

namespace {
// (B, T, C) columns [part * C, (part + 1) * C) of c_attn's output as (B, H, T, D) heads:
// q, k or v (sdpa's layout; Note [Head-major qkv]).
at::Tensor heads(const at::Tensor& part, int64_t H) {
  const int64_t B = part.size(0), T = part.size(1), D = part.size(2) / H;
  return part.view({B, T, H, D}).transpose(1, 2);
}
// (B, H, T, D) -> (B, T, C), contiguous.
at::Tensor merge_heads(const at::Tensor& y) {
  const int64_t B = y.size(0), H = y.size(1), T = y.size(2), D = y.size(3);
  return y.transpose(1, 2).contiguous().view({B, T, H * D});
}
}  // namespace

at::Tensor Gpt2AttentionImpl::probabilities(at::Tensor q, at::Tensor k) {
  const int64_t T = q.size(2), D = q.size(3);
  at::Tensor att = at::matmul(q, k.transpose(-2, -1));  // (B, H, T, T)
  q.reset();
  k.reset();
  // In place: neither the matmul nor the scaling saves these scores for backward.
  att.mul_(1.0 / std::sqrt(static_cast<double>(D)));
  att.masked_fill_(future_mask_.narrow(0, 0, T).narrow(1, 0, T), -std::numeric_limits<float>::infinity());
  return at::softmax(att, -1);
}

at::Tensor Gpt2AttentionImpl::weigh_values(at::Tensor probs, const at::Tensor& v) {
  const at::Tensor att = apply_dropout(probs, config_.attn_pdrop, is_training(), config_.kernels);
  probs.reset();
  return at::matmul(att, v);  // (B, H, T, D)
}

at::Tensor Gpt2AttentionImpl::core(at::Tensor qkv) {
  if (config_.attention == gpt2::Attention::Explicit) {
    std::vector<at::Tensor> qkv_heads = qkv.unbind(0);  // Note [Head-major qkv]
    qkv.reset();  // Note [Tensor lifetimes]
    at::Tensor probs = probabilities(std::move(qkv_heads[0]), std::move(qkv_heads[1]));
    const at::Tensor y = weigh_values(std::move(probs), qkv_heads[2]);  // frees probs: Note [Tensor lifetimes]
    qkv_heads.clear();
    return merge_heads(y);
  }
  const int64_t C = config_.n_embd, H = config_.n_head;
  at::Tensor q, k, v;  // (B, H, T, D) views into c_attn's (B, T, 3C) output
  {
    const std::vector<at::Tensor> parts = qkv.split(C, /*dim=*/2);
    qkv.reset();  // Note [Tensor lifetimes]
    q = heads(parts[0], H);
    k = heads(parts[1], H);
    v = heads(parts[2], H);
  }
  const at::Tensor y = at::scaled_dot_product_attention(
      q, k, v, /*attn_mask=*/{}, is_training() ? config_.attn_pdrop : 0.0, /*is_causal=*/true);
  q.reset();
  k.reset();
  v.reset();
  return merge_heads(y);
}

at::Tensor Gpt2AttentionImpl::softmax_stage(const at::Tensor& qkv) {
  std::vector<at::Tensor> qkv_heads = qkv.unbind(0);  // Note [Head-major qkv]
  return probabilities(std::move(qkv_heads[0]), std::move(qkv_heads[1]));
}

at::Tensor Gpt2AttentionImpl::mix_stage(at::Tensor probs, const at::Tensor& qkv) {
  std::vector<at::Tensor> qkv_heads = qkv.unbind(0);
  at::Tensor y = weigh_values(std::move(probs), qkv_heads[2]);
  qkv_heads.clear();
  return merge_heads(y);
}

at::Tensor Gpt2AttentionImpl::project(at::Tensor y) {
  y = c_proj(y);
  // The parameter y would otherwise live until the end of the caller's full
  // expression, through an operator stage's residual add (Note [Tensor lifetimes]).
  at::Tensor out = apply_dropout(y, config_.resid_pdrop, is_training(), config_.kernels);
  y.reset();
  return out;
}

Gpt2MlpImpl::Gpt2MlpImpl(const gpt2::Gpt2Config& config) : resid_pdrop_(config.resid_pdrop), kernels_(config.kernels) {
  c_fc = register_module("c_fc", linear(config.n_embd, 4 * config.n_embd));
  c_proj = register_module("c_proj", linear(4 * config.n_embd, config.n_embd));
}

at::Tensor Gpt2MlpImpl::fc(const at::Tensor& h) {
  // With memopt's kernels the bias is added inside the fused GELU.
  return kernels_ == gpt2::Kernels::Memopt ? at::linear(h, c_fc->weight) : c_fc(h);
}

at::Tensor Gpt2MlpImpl::gelu(const at::Tensor& u) {
  if (kernels_ == gpt2::Kernels::Memopt) return bias_gelu(u, c_fc->bias);
  return at::gelu(u, "tanh");  // GPT-2's "gelu_new" is the tanh approximation
}

at::Tensor Gpt2MlpImpl::project(at::Tensor g) {
  g = c_proj(g);
  // The parameter g would otherwise live until the end of the caller's full
  // expression, through the residual add (Note [Tensor lifetimes]).
  at::Tensor out = apply_dropout(g, resid_pdrop_, is_training(), kernels_);
  g.reset();
  return out;
}

at::Tensor Gpt2MlpImpl::forward(at::Tensor x) {
  x = fc(x);
  x = gelu(x);
  return project(std::move(x));
}

Gpt2BlockImpl::Gpt2BlockImpl(const gpt2::Gpt2Config& config) {
  ln_1 = register_module("ln_1", layer_norm(config));
  attn = register_module("attn", Gpt2Attention(config));
  ln_2 = register_module("ln_2", layer_norm(config));
  mlp = register_module("mlp", Gpt2Mlp(config));
}

at::Tensor Gpt2BlockImpl::attention_half(const at::Tensor& x) { return residual_add(x, attn->forward(ln_1(x))); }
at::Tensor Gpt2BlockImpl::mlp_half(const at::Tensor& x) { return residual_add(x, mlp->forward(ln_2(x))); }

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

namespace {

// The tensors of an operator stage's input: its `count` parts, named for the error.
const Activation& parts(const Activation& a, size_t count, const char* stage) {
  if (a.size() != count)
    throw std::invalid_argument(std::string("gpt2: stage ") + stage + " takes " + std::to_string(count) +
                                " tensors, got " + std::to_string(a.size()));
  return a;
}

// The three shapes of an operator stage (Note [Operator stages] in gpt2/stages.h),
// around the operator f:
using StageForward = std::function<Activation(const Activation&, const Batch&)>;
using Operator = std::function<at::Tensor(const at::Tensor&)>;
// x -> (x, f(x)): a layer norm, which starts a run with the residual beside it;
StageForward opens_run(const char* name, Operator f) {
  return [name, f = std::move(f)](const Activation& a, const Batch&) {
    const at::Tensor& x = parts(a, 1, name)[0];
    return Activation{x, f(x)};
  };
}
// (x, v) -> (x, f(v)): an operator beside the residual;
StageForward beside(const char* name, Operator f) {
  return [name, f = std::move(f)](const Activation& a, const Batch&) {
    return Activation{parts(a, 2, name)[0], f(a[1])};
  };
}
// (x, v) -> x + f(v): the projection with its dropout, and the residual add that ends the run.
StageForward ends_run(const char* name, Operator f) {
  return [name, f = std::move(f)](const Activation& a, const Batch&) {
    return Activation{Gpt2BlockImpl::residual_add(parts(a, 2, name)[0], f(a[1]))};
  };
}

std::vector<at::Tensor> params_of(std::initializer_list<const torch::nn::Module*> modules) {
  std::vector<at::Tensor> out;
  for (const torch::nn::Module* mod : modules)
    for (const at::Tensor& p : mod->parameters()) out.push_back(p);
  return out;
}

// One stage of a block at its granularity (gpt2/stages.h). Operator stages return
// their input's residual tensor itself as their first output (Note [Multi-tensor
// activations] in model/staged_model.h).
Stage block_stage(const gpt2::StageLayout& layout, Gpt2BlockImpl* b, gpt2::Kernels kernels) {
  using gpt2::StageKind;
  Stage s;
  s.name = layout.name;
  switch (layout.kind) {
    case StageKind::Block:
      s.forward = one_tensor([b](const at::Tensor& x, const Batch&) { return b->forward(x); });
      s.parameters = b->parameters();
      break;
    case StageKind::AttentionHalf:
      s.forward = one_tensor([b](const at::Tensor& x, const Batch&) { return b->attention_half(x); });
      s.parameters = params_of({b->ln_1.get(), b->attn.get()});
      break;
    case StageKind::MlpHalf:
      s.forward = one_tensor([b](const at::Tensor& x, const Batch&) { return b->mlp_half(x); });
      s.parameters = params_of({b->ln_2.get(), b->mlp.get()});
      break;
    case StageKind::Ln1:
      s.forward = opens_run("ln_1", [b](const at::Tensor& x) { return b->ln_1(x); });
      s.parameters = params_of({b->ln_1.get()});
      break;
    case StageKind::AttentionQkv:
      s.forward = beside("attn.c_attn", [b](const at::Tensor& h) { return b->attn->qkv(h); });
      s.parameters = params_of({b->attn->c_attn.get()});
      break;
    case StageKind::AttentionCore:
      s.forward = beside("attn.core", [b](const at::Tensor& qkv) { return b->attn->core(qkv); });
      break;
    case StageKind::AttentionSoftmax:
      // (x, qkv) -> (x, qkv, probabilities): c_attn's output passes on for v.
      s.forward = [b](const Activation& a, const Batch&) {
        const Activation& in = parts(a, 2, "attn.softmax");
        return Activation{in[0], in[1], b->attn->softmax_stage(in[1])};
      };
      break;
    case StageKind::AttentionMix:
      // (x, qkv, probabilities) -> (x, y)
      s.forward = [b](const Activation& a, const Batch&) {
        const Activation& in = parts(a, 3, "attn.mix");
        return Activation{in[0], b->attn->mix_stage(in[2], in[1])};
      };
      break;
    case StageKind::AttentionProj:
      s.forward = ends_run("attn.c_proj", [b](const at::Tensor& y) { return b->attn->project(y); });
      s.parameters = params_of({b->attn->c_proj.get()});
      break;
    case StageKind::Ln2:
      s.forward = opens_run("ln_2", [b](const at::Tensor& x) { return b->ln_2(x); });
      s.parameters = params_of({b->ln_2.get()});
      break;
    case StageKind::MlpFc:
      s.forward = beside("mlp.c_fc", [b](const at::Tensor& h) { return b->mlp->fc(h); });
      // The bias too, homed here (gpt2/stages.h) although the fused GELU reads it.
      s.parameters = params_of({b->mlp->c_fc.get()});
      break;
    case StageKind::MlpGelu:
      s.forward = beside("mlp.gelu", [b](const at::Tensor& u) { return b->mlp->gelu(u); });
      if (kernels == gpt2::Kernels::Memopt) s.parameters = {b->mlp->c_fc->bias};
      break;
    case StageKind::MlpProj:
      s.forward = ends_run("mlp.c_proj", [b](const at::Tensor& g) { return b->mlp->project(g); });
      s.parameters = params_of({b->mlp->c_proj.get()});
      break;
    case StageKind::Embed:
    case StageKind::Head:
      throw std::logic_error("gpt2: " + layout.name + " is not a block's stage");
  }
  return s;
}

}  // namespace

StagedModel stage_gpt2(Gpt2 model) {
  using gpt2::StageKind;
  Gpt2Impl* m = model.get();  // kept alive by the StagedModel's owner
  std::vector<Stage> stages;
  int64_t block = -1;
  for (const gpt2::StageLayout& layout : gpt2::stage_layout(m->config())) {
    switch (layout.kind) {
      case StageKind::Embed:
        stages.push_back({layout.name, one_tensor([m](const at::Tensor& ids, const Batch&) { return m->embed(ids); }),
                          {m->wte->weight, m->wpe->weight}});
        break;
      case StageKind::Head: {
        std::vector<at::Tensor> head_params = params_of({m->ln_f.get()});
        head_params.push_back(m->wte->weight);  // tied lm_head
        stages.push_back({layout.name, one_tensor([m](const at::Tensor& x, const Batch& batch) {
                            return m->head_loss(x, batch.targets);
                          }),
                          std::move(head_params)});
        break;
      }
      default:
        // A block's first stage starts the next block.
        if (layout.kind == StageKind::Block || layout.kind == StageKind::AttentionHalf || layout.kind == StageKind::Ln1)
          ++block;
        stages.push_back(block_stage(layout, m->block(block).get(), m->config().kernels));
        stages.back().role = gpt2::stage_role(layout.kind);
        stages.back().block = layout.block;
    }
  }
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

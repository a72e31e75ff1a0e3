// stages.h: how GPT-2 is cut into stages at each granularity -- the kinds, their
// names, which of them carry the residual stream beside their output, and the
// parameters each reads first. The one list the analytic twin, the estimator and the
// model follow. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2/config.h"
#include "solver/chain/chain.h"

namespace memopt::gpt2 {

// Note [Operator stages]
// At Granularity::Op each block is GPT-2's operators in order:
//   ln_1         x                -> (x, h)        h = ln_1(x)
//   attn.c_attn  (x, h)           -> (x, qkv)      the QKV projection (head-major with
//                                                    explicit attention: Note [Head-major
//                                                    qkv] in model/gpt2.cpp)
//   attn.softmax (x, qkv)         -> (x, qkv, p)   p = softmax(mask(q k^T / sqrt(D)))
//   attn.mix     (x, qkv, p)      -> (x, y)        dropout(p) @ v, heads merged
//   attn.c_proj  (x, y)           -> x + dropout(y W + b)
//   ln_2, mlp.c_fc, mlp.gelu, mlp.c_proj: the same for the MLP (GELU its own stage).
// With sdpa attention, whose one kernel never materializes p, attn.softmax and
// attn.mix are one stage, attn.core (x, qkv) -> (x, y): eight stages per block, nine
// with explicit attention. The residual x travels beside the operators as the first
// tensor of each output, the same tensor its input held: the stage's carried bytes
// (docs/formats.md, "Carried bytes"), so that keeping two of those boundaries costs x once.
// Its own output follows; attn.softmax also carries qkv on to attn.mix.
//
// Note [Two attention-core stages]
// Explicit attention saves three T x T tensors per head: the probabilities (for the
// softmax backward), the dropout mask (ATen's kernel) and the dropped probabilities
// (for the product with v). Split after the softmax, a plan can recompute only the
// second stage -- one elementwise pass and a matmul -- to free the last two, and keep
// the probabilities; recomputing the whole core also costs q k^T, the scaling, the mask
// and the softmax. Both stages have the attention_core role: Megatron's selective
// rule recomputes them together from (x, qkv).
enum class StageKind {
  Embed,
  Block,          // Granularity::Block
  AttentionHalf,  // Granularity::Sublayer
  MlpHalf,
  Ln1,            // Granularity::Op (Note [Operator stages])
  AttentionQkv,
  AttentionCore,     // sdpa attention (Note [Operator stages])
  AttentionSoftmax,  // explicit attention (Note [Two attention-core stages])
  AttentionMix,
  AttentionProj,
  Ln2,
  MlpFc,
  MlpGelu,
  MlpProj,
  Head,
};

struct StageLayout {
  StageKind kind;
  std::string name;   // "embed", "h.3", "h.3.attn", "h.3.attn.core", "head"
  std::string block;  // "h.3" for a stage that is part of block 3; empty for embed, head and whole blocks
};

// Every stage of `config` at its granularity, in chain order.
std::vector<StageLayout> stage_layout(const Gpt2Config& config);

// What the selective and pointwise baselines read (solver::StageRole): the attention
// core, and the elementwise stages (the layer norms and GELU; dropouts and softmax
// sit inside stages with a matmul).
solver::StageRole stage_role(StageKind kind);

// Whether the stage's output starts with its input's residual tensor (N x C floats).
bool carries_residual(StageKind kind);
// The floats per token its output shares with its input: the residual's C, and for
// attn.softmax also qkv's 3C.
int64_t carried_floats_per_token(StageKind kind, const Gpt2Config& config);

// The parameters the stage is the first to read (Note [Parameter homes] in
// model/staged_model.h), as a count of floats; the head reads the tied wte homed at
// embed and counts only ln_f here.
int64_t home_parameter_count(StageKind kind, const Gpt2Config& config);

}  // namespace memopt::gpt2

// stages.h: how GPT-2 is cut into stages at each granularity -- the kinds, their
// names, which of them carry the residual stream beside their output, and the
// parameters each reads first. The one list the analytic twin, the estimator and the
// model follow. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2/config.h"
#include "solver/chain.h"

namespace memopt::gpt2 {

// Note [Operator stages]
// At Granularity::Op each block is eight stages, GPT-2's operators in order:
//   ln_1         x            -> (x, h)        h = ln_1(x)
//   attn.c_attn  (x, h)       -> (x, qkv)      the QKV projection
//   attn.core    (x, qkv)     -> (x, y)        heads, q k^T, mask, softmax, dropout, @ v,
//                                              heads merged (one fused kernel with sdpa)
//   attn.c_proj  (x, y)       -> x + dropout(y W + b)
//   ln_2, mlp.c_fc, mlp.gelu, mlp.c_proj: the same for the MLP (GELU its own stage).
// The residual x travels beside the operators as the first tensor of each output,
// the same tensor its input held: the stage's carried bytes (docs/formats.md section
// 1.7), so that keeping two of those boundaries costs x once. Its own output follows.
enum class StageKind {
  Embed,
  Block,          // Granularity::Block
  AttentionHalf,  // Granularity::Sublayer
  MlpHalf,
  Ln1,            // Granularity::Op (Note [Operator stages])
  AttentionQkv,
  AttentionCore,
  AttentionProj,
  Ln2,
  MlpFc,
  MlpGelu,
  MlpProj,
  Head,
};

struct StageLayout {
  StageKind kind;
  std::string name;  // "embed", "h.3", "h.3.attn", "h.3.attn.core", "head"
};

// Every stage of `config` at its granularity, in chain order.
std::vector<StageLayout> stage_layout(const Gpt2Config& config);

// What the selective and pointwise baselines read (solver::StageRole): the attention
// core, and the elementwise stages (the layer norms and GELU; dropouts and softmax
// sit inside stages with a matmul).
solver::StageRole stage_role(StageKind kind);

// Whether the stage's output starts with its input's residual tensor (N x C floats).
bool carries_residual(StageKind kind);

// The parameters the stage is the first to read (Note [Parameter homes] in
// model/staged_model.h), as a count of floats; the head reads the tied wte homed at
// embed and counts only ln_f here.
int64_t home_parameter_count(StageKind kind, const Gpt2Config& config);

}  // namespace memopt::gpt2

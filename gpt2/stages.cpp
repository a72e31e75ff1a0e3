// stages.cpp: GPT-2's stage layouts (Note [Operator stages]).
#include "gpt2/stages.h"

namespace memopt::gpt2 {

std::vector<StageLayout> stage_layout(const Gpt2Config& c) {
  std::vector<StageLayout> out{{StageKind::Embed, "embed"}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i);
    switch (c.granularity) {
      case Granularity::Block:
        out.push_back({StageKind::Block, h});
        break;
      case Granularity::Sublayer:
        out.push_back({StageKind::AttentionHalf, h + ".attn", h});
        out.push_back({StageKind::MlpHalf, h + ".mlp", h});
        break;
      case Granularity::Op:
        out.push_back({StageKind::Ln1, h + ".ln_1", h});
        out.push_back({StageKind::AttentionQkv, h + ".attn.c_attn", h});
        if (c.attention == Attention::Explicit) {
          out.push_back({StageKind::AttentionSoftmax, h + ".attn.softmax", h});
          out.push_back({StageKind::AttentionMix, h + ".attn.mix", h});
        } else {
          out.push_back({StageKind::AttentionCore, h + ".attn.core", h});
        }
        out.push_back({StageKind::AttentionProj, h + ".attn.c_proj", h});
        out.push_back({StageKind::Ln2, h + ".ln_2", h});
        out.push_back({StageKind::MlpFc, h + ".mlp.c_fc", h});
        out.push_back({StageKind::MlpGelu, h + ".mlp.gelu", h});
        out.push_back({StageKind::MlpProj, h + ".mlp.c_proj", h});
        break;
    }
  }
  out.push_back({StageKind::Head, "head"});
  return out;
}

solver::StageRole stage_role(StageKind kind) {
  switch (kind) {
    case StageKind::AttentionCore:
    case StageKind::AttentionSoftmax:
    case StageKind::AttentionMix: return solver::StageRole::AttentionCore;
    case StageKind::Ln1:
    case StageKind::Ln2:
    case StageKind::MlpGelu: return solver::StageRole::Pointwise;
    default: return solver::StageRole::Other;
  }
}

bool carries_residual(StageKind kind) {
  switch (kind) {
    case StageKind::Ln1:
    case StageKind::AttentionQkv:
    case StageKind::AttentionCore:
    case StageKind::AttentionSoftmax:
    case StageKind::AttentionMix:
    case StageKind::Ln2:
    case StageKind::MlpFc:
    case StageKind::MlpGelu:
      return true;
    default:
      return false;
  }
}

int64_t carried_floats_per_token(StageKind kind, const Gpt2Config& c) {
  if (!carries_residual(kind)) return 0;
  return kind == StageKind::AttentionSoftmax ? 4 * c.n_embd : c.n_embd;
}

int64_t home_parameter_count(StageKind kind, const Gpt2Config& c) {
  const int64_t C = c.n_embd;
  const int64_t ln = 2 * C, qkv = 3 * C * C + 3 * C, attn_proj = C * C + C;
  const int64_t fc = 4 * C * C + 4 * C, mlp_proj = 4 * C * C + C;
  switch (kind) {
    case StageKind::Embed: return (c.vocab_size + c.n_positions) * C;
    case StageKind::Block: return 2 * ln + qkv + attn_proj + fc + mlp_proj;
    case StageKind::AttentionHalf: return ln + qkv + attn_proj;
    case StageKind::MlpHalf: return ln + fc + mlp_proj;
    case StageKind::Ln1:
    case StageKind::Ln2: return ln;
    case StageKind::AttentionQkv: return qkv;
    case StageKind::AttentionProj: return attn_proj;
    case StageKind::MlpFc: return fc;
    case StageKind::MlpProj: return mlp_proj;
    case StageKind::AttentionCore:
    case StageKind::AttentionSoftmax:
    case StageKind::AttentionMix:
    case StageKind::MlpGelu: return 0;
    case StageKind::Head: return ln;
  }
  return 0;
}

}  // namespace memopt::gpt2

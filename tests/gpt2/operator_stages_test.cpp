// operator_stages_test.cpp: GPT-2 at operator granularity (Note [Operator stages] in
// gpt2/stages.h) -- the layout, each operator stage's output and saved bytes in the
// analytic twin against closed forms counted tensor by tensor, a block's operator
// stages against the block stage of the same twin, and the modeled profile's carried
// bytes, roles and roofline against the block-granularity estimate.
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpt2/analytic.h"
#include "gpt2/estimate.h"
#include "tests/gpt2/small_config.h"
#include "gpt2/gpu_specs.h"
#include "gpt2/stages.h"
#include "solver/chain/chain.h"
#include "solver/chain/coarsen.h"

namespace memopt::gpt2 {
namespace {

using testing::small_config;
const Gpt2Workload kWorkload = testing::kSmallWorkload;
constexpr int64_t N = 3 * 96, C = 64, BHTT = 3 * 4 * 96 * 96, F = 4;  // F: bytes per float

TEST(OperatorStages, NinePerBlockWithExplicitAttentionEightWithSdpaNamedAfterTheModules) {
  const std::vector<std::string> explicit_block1 = {
      "h.1.ln_1", "h.1.attn.c_attn", "h.1.attn.softmax", "h.1.attn.mix", "h.1.attn.c_proj",
      "h.1.ln_2", "h.1.mlp.c_fc",    "h.1.mlp.gelu",     "h.1.mlp.c_proj"};
  const std::vector<std::string> sdpa_block1 = {"h.1.ln_1", "h.1.attn.c_attn", "h.1.attn.core", "h.1.attn.c_proj",
                                                "h.1.ln_2", "h.1.mlp.c_fc",    "h.1.mlp.gelu",  "h.1.mlp.c_proj"};
  for (const Attention attention : {Attention::Explicit, Attention::Sdpa}) {
    SCOPED_TRACE(attention_word(attention));
    const auto& block1 = attention == Attention::Explicit ? explicit_block1 : sdpa_block1;
    const size_t per_block = block1.size();
    const auto layout = stage_layout(small_config(attention, Granularity::Op, 0.1));
    ASSERT_EQ(layout.size(), 2u + per_block * 2u);
    for (size_t k = 0; k < per_block; ++k) EXPECT_EQ(layout[1 + per_block + k].name, block1[k]);
    EXPECT_EQ(layout.front().name, "embed");
    EXPECT_EQ(layout.back().name, "head");
    int cores = 0, pointwise = 0, carrying = 0;
    for (const StageLayout& s : layout) {
      cores += stage_role(s.kind) == solver::StageRole::AttentionCore;
      pointwise += stage_role(s.kind) == solver::StageRole::Pointwise;
      carrying += carries_residual(s.kind);
    }
    const int cores_per_block = attention == Attention::Explicit ? 2 : 1;
    EXPECT_EQ(cores, 2 * cores_per_block);
    EXPECT_EQ(pointwise, 6);                                   // ln_1, ln_2, gelu per block
    EXPECT_EQ(carrying, 2 * (static_cast<int>(per_block) - 2));  // all but the two residual adds per block
  }
}

// Note [Block boundaries] in solver/chain/coarsen.h: the cut writes each stage's block, the
// roofline profile carries it, and it groups the stages into the model's blocks as
// their names do for profiles without it.
TEST(OperatorStages, EachStageNamesItsBlockAndTheBlocksGroupAsTheNamesDo) {
  for (const Granularity granularity : {Granularity::Block, Granularity::Sublayer, Granularity::Op}) {
    SCOPED_TRACE(static_cast<int>(granularity));
    const Gpt2Config config = small_config(Attention::Explicit, granularity, 0.1);
    for (const StageLayout& s : stage_layout(config)) {
      const bool part = granularity != Granularity::Block && s.kind != StageKind::Embed && s.kind != StageKind::Head;
      EXPECT_EQ(s.block, part ? std::string(solver::block_of(s.name)) : "") << s.name;
    }
    EstimateOptions o{config, kWorkload, *gpu_spec("h100-80gb"), Dtype::Fp32, "small", "test"};
    solver::Chain chain = estimate_gpt2(o).profile.chain;
    const std::optional<solver::Coarsening> by_field = solver::coarsen_to_blocks(chain);
    for (solver::Stage& st : chain.stages) st.block.clear();  // as a profile from before the field
    const std::optional<solver::Coarsening> by_name = solver::coarsen_to_blocks(chain);
    ASSERT_EQ(by_field.has_value(), granularity != Granularity::Block);
    ASSERT_EQ(by_name.has_value(), by_field.has_value());
    if (by_field) {
      EXPECT_EQ(by_field->first, by_name->first);
      EXPECT_EQ(by_field->chain.length(), config.n_layer + 2);
    }
  }
}

// Counted tensor by tensor from model/gpt2.cpp's ops, explicit attention, dropout on,
// ATen kernels: what each stage outputs (the residual x first where it is carried)
// and what autograd keeps beyond its input.
TEST(OperatorStages, TwinBytesAreTheOperatorsTensors) {
  const auto a = gpt2_analytic_stages(small_config(Attention::Explicit, Granularity::Op, 0.1), kWorkload);
  const int64_t x = F * N * C, stats = 2 * F * N, mask = N * C, qkv = 3 * F * N * C;
  struct Expected { int64_t out, saved_beyond_out, carried; };
  const Expected expected[9] = {
      {x + F * N * C, stats, x},           // ln_1: (x, h); mean and rstd
      {x + qkv, 0, x},                     // c_attn: (x, head-major qkv); the linear keeps its input h
      {x + qkv + F * BHTT, 0, x + qkv},    // softmax: (x, qkv, probabilities); q, k are qkv's slices
      {x + F * N * C,                      // mix: (x, y); v is qkv's slice; the dropped
       F * BHTT + BHTT, x},                // probabilities and their bool mask
      {F * N * C, mask, 0},                // c_proj + add: x'; the residual dropout's mask
      {x + F * N * C, stats, x},           // ln_2
      {x + 4 * F * N * C, 0, x},           // c_fc: (x', f)
      {x + 4 * F * N * C, 0, x},           // gelu: (x', g); GELU keeps its input f
      {F * N * C, mask, 0},                // c_proj + add
  };
  for (int block = 0; block < 2; ++block) {
    for (int k = 0; k < 9; ++k) {
      const AnalyticStage& s = a.at(static_cast<size_t>(1 + 9 * block + k));
      SCOPED_TRACE(s.name);
      EXPECT_EQ(s.out_bytes, expected[k].out);
      EXPECT_EQ(s.saved_bytes - s.out_bytes, expected[k].saved_beyond_out);
      EXPECT_EQ(s.carried_bytes, expected[k].carried);
    }
  }
}

// A block's operator stages, all kept, hold exactly what the block stage keeps. With
// explicit attention q, k and v are slices of the head-major qkv (Note [Head-major
// qkv] in model/gpt2.cpp), the same storage the block's matmuls save; the flash kernel
// keeps them as views of c_attn's output, which is also the stage boundary.
TEST(OperatorStages, KeepExactlyWhatTheBlockKeeps) {
  for (const Attention attention : {Attention::Explicit, Attention::Sdpa}) {
    const double dropout = attention == Attention::Sdpa ? 0.0 : 0.1;
    const auto ops = gpt2_analytic_stages(small_config(attention, Granularity::Op, dropout), kWorkload);
    const auto blocks = gpt2_analytic_stages(small_config(attention, Granularity::Block, dropout), kWorkload);
    const int per_block = attention == Attention::Explicit ? 9 : 8;
    for (int block = 0; block < 2; ++block) {
      int64_t op_kept = 0;  // everything new in the block's ā, what they carry once
      for (int k = 0; k < per_block; ++k) {
        const AnalyticStage& s = ops.at(static_cast<size_t>(1 + per_block * block + k));
        op_kept += s.saved_bytes - s.carried_bytes;
      }
      EXPECT_EQ(op_kept, blocks.at(static_cast<size_t>(1 + block)).saved_bytes) << attention_word(attention);
    }
  }
}

TEST(OperatorStages, ModeledProfileCarriesTheResidualInTheDtypeAndSumsToTheBlocks) {
  EstimateOptions o;
  o.config = small_config(Attention::Explicit, Granularity::Op, 0.1);
  o.workload = kWorkload;
  o.gpu = *gpu_spec("h100-sxm");
  o.dtype = Dtype::Bf16;
  const Estimate op = estimate_gpt2(o);
  o.config.granularity = Granularity::Block;
  const Estimate block = estimate_gpt2(o);
  ASSERT_EQ(op.profile.chain.length(), 20);
  EXPECT_TRUE(solver::validate(op.profile.chain).empty()) << solver::validate(op.profile.chain);
  const solver::Stage& ln_1 = op.profile.chain.stages[1];
  EXPECT_EQ(ln_1.carried_bytes, 2 * N * C);  // bf16
  EXPECT_EQ(ln_1.role, solver::StageRole::Pointwise);
  const solver::Stage& softmax = op.profile.chain.stages[3];
  EXPECT_EQ(softmax.role, solver::StageRole::AttentionCore);
  EXPECT_EQ(softmax.carried_bytes, 2 * 4 * N * C);  // x and qkv
  EXPECT_EQ(op.profile.chain.stages[4].role, solver::StageRole::AttentionCore);
  EXPECT_EQ(op.profile.chain.stages[4].carried_bytes, 2 * N * C);
  EXPECT_EQ(op.profile.chain.stages[5].carried_bytes, 0);
  // The same kernels, cut differently: the same forward FLOPs, bytes moved and times.
  const auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
  EXPECT_DOUBLE_EQ(sum(op.fwd_flop), sum(block.fwd_flop));
  EXPECT_DOUBLE_EQ(sum(op.fwd_bytes_moved), sum(block.fwd_bytes_moved));
  EXPECT_NEAR(solver::sum_fwd_bwd_ms(op.profile.chain), solver::sum_fwd_bwd_ms(block.profile.chain),
              1e-12 * solver::sum_fwd_bwd_ms(block.profile.chain));  // sums in another order
  // Parameters: every stage's home bytes add up to the block profile's.
  int64_t op_params = 0, block_params = 0;
  for (const auto& s : op.profile.chain.stages) op_params += *s.param_bytes;
  for (const auto& s : block.profile.chain.stages) block_params += *s.param_bytes;
  EXPECT_EQ(op_params, block_params);
}

}  // namespace
}  // namespace memopt::gpt2

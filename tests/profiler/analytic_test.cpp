// analytic_test.cpp: measured GPT-2 stage bytes against the analytic twin
// (gpt2/analytic.h), on several shapes, all three granularities, both attention
// kernels, both kernel choices (memopt's mask-free dropout or ATen's), both losses
// (ATen's or the chunked one), with and without dropout. Every field -- output, saved, both forward transients and the
// backward transient -- must agree to the byte: the twin replays each op's
// allocations, so any difference means an op changed on one side.
#include <string>

#include <gtest/gtest.h>

#include "gpt2/analytic.h"
#include "measure/cpu_allocator.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"

namespace memopt::profiler {
namespace {

using gpt2::Attention;
using gpt2::Granularity;

struct Case {
  const char* label;
  int64_t n_layer, n_embd, n_head, vocab, batch, seq_len;
  Attention attention;
  double dropout;
};

// Shapes chosen so that no two terms coincide (N*C != B*H*T*T, V != C, ...): a
// formula with one term in the wrong place cannot pass by accident.
const Case kCases[] = {
    {"explicit_dropout", 2, 64, 4, 256, 2, 48, Attention::Explicit, 0.1},
    {"explicit_nodropout", 2, 64, 4, 256, 2, 48, Attention::Explicit, 0.0},
    {"sdpa_nodropout", 2, 64, 4, 256, 2, 48, Attention::Sdpa, 0.0},
    {"sdpa_dropout", 2, 64, 4, 256, 2, 48, Attention::Sdpa, 0.1},
    {"explicit_wide", 1, 96, 3, 200, 3, 40, Attention::Explicit, 0.2},
    {"sdpa_wide", 1, 96, 3, 200, 3, 40, Attention::Sdpa, 0.0},
    {"sdpa_long", 1, 64, 2, 128, 1, 200, Attention::Sdpa, 0.0},  // T >= 192: other flash blocking
    // N = 320 > 256 rows and V = 9000 > 8192 columns: the chunked loss runs several
    // blocks, the last ones partial.
    {"sdpa_blocks", 1, 32, 2, 9000, 2, 160, Attention::Sdpa, 0.0},
};

class AnalyticVsMeasured
    : public ::testing::TestWithParam<std::tuple<Case, Granularity, gpt2::Kernels, gpt2::Loss>> {};

TEST_P(AnalyticVsMeasured, StageBytesAgree) {
  const auto& [c, granularity, kernels, loss] = GetParam();
  gpt2::Gpt2Spec spec;
  spec.config.n_layer = c.n_layer;
  spec.config.n_embd = c.n_embd;
  spec.config.n_head = c.n_head;
  spec.config.vocab_size = c.vocab;
  spec.config.n_positions = c.seq_len;
  spec.config.set_dropout(c.dropout);
  spec.config.attention = c.attention;
  spec.config.granularity = granularity;
  spec.config.kernels = kernels;
  spec.config.loss = loss;
  spec.workload = {c.batch, c.seq_len};

  model::StagedModel model = model::stage_gpt2(model::make_gpt2(spec));
  const model::Batch batch = model::make_gpt2_batch(spec);
  measure::CpuMemoryMeter meter;
  measure::CpuTimer timer;
  ProfileOptions options;
  options.repeat = 1;
  const Measurement m = measure_chain(model, batch, meter, timer, options);
  const auto predicted = gpt2::gpt2_analytic_stages(spec.config, spec.workload);

  EXPECT_EQ(m.chain.input_bytes, gpt2::gpt2_analytic_input_bytes(spec.workload));
  EXPECT_EQ(model.parameter_bytes(), gpt2::gpt2_analytic_parameter_bytes(spec.config));
  ASSERT_EQ(m.chain.stages.size(), predicted.size());
  for (size_t i = 0; i < predicted.size(); ++i) {
    const solver::Stage& s = m.chain.stages[i];
    const gpt2::AnalyticStage& p = predicted[i];
    const StageDetail& d = m.details[i];
    SCOPED_TRACE("stage " + s.name);
    EXPECT_EQ(s.name, p.name);
    EXPECT_EQ(s.out_bytes, p.out_bytes);
    EXPECT_EQ(s.carried_bytes, p.carried_bytes);
    EXPECT_EQ(s.saved_bytes, p.saved_bytes);
    EXPECT_EQ(d.fwd_tmp_grad_bytes, p.fwd_tmp_grad_bytes);
    EXPECT_EQ(d.fwd_tmp_nograd_bytes, p.fwd_tmp_nograd_bytes);
    EXPECT_EQ(s.bwd_tmp_bytes, p.bwd_tmp_bytes);
  }
}

std::string case_name(const ::testing::TestParamInfo<AnalyticVsMeasured::ParamType>& info) {
  return std::string(std::get<0>(info.param).label) + "_" + gpt2::granularity_word(std::get<1>(info.param)) +
         "_" + gpt2::kernels_word(std::get<2>(info.param)) + "_" + gpt2::loss_word(std::get<3>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Gpt2, AnalyticVsMeasured,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(Granularity::Block, Granularity::Sublayer, Granularity::Op),
                                            ::testing::Values(gpt2::Kernels::Memopt, gpt2::Kernels::Aten),
                                            ::testing::Values(gpt2::Loss::Aten, gpt2::Loss::Chunked)),
                         case_name);

}  // namespace
}  // namespace memopt::gpt2

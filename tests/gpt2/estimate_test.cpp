// estimate_test.cpp: the modeled profile of `memopt estimate` -- bytes equal the
// analytic twin in fp32 and rescale as Note [Activation dtype] says in bf16, a stage's
// roofline time equals its hand-computed closed form, the GPU table and its errors,
// and the real CLI's error for an unknown GPU.
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gpt2/analytic.h"
#include "gpt2/estimate.h"
#include "tests/gpt2/small_config.h"
#include "solver/io/json_printer.h"

namespace memopt::gpt2 {
namespace {

using testing::small_config;
const gpt2::Gpt2Workload kWorkload = testing::kSmallWorkload;  // N = 288, B H T^2 = 110592

TEST(EstimateBytes, Fp32EqualsTheAnalyticTwin) {
  for (const auto g : {gpt2::Granularity::Block, gpt2::Granularity::Sublayer, gpt2::Granularity::Op})
  for (const auto kernels : {gpt2::Kernels::Aten, gpt2::Kernels::Memopt}) {
    auto c = small_config(gpt2::Attention::Explicit, g, 0.1);
    c.kernels = kernels;
    const auto analytic = gpt2_analytic_stages(c, kWorkload);
    const auto est = gpt2_stage_bytes(c, kWorkload, Dtype::Fp32);
    ASSERT_EQ(est.size(), analytic.size());
    for (size_t i = 0; i < est.size(); ++i) {
      SCOPED_TRACE(est[i].name);
      EXPECT_EQ(est[i].name, analytic[i].name);
      EXPECT_EQ(est[i].out_bytes, analytic[i].out_bytes);
      EXPECT_EQ(est[i].saved_bytes, analytic[i].saved_bytes);
      EXPECT_EQ(est[i].fwd_tmp_grad_bytes, analytic[i].fwd_tmp_grad_bytes);
      EXPECT_EQ(est[i].fwd_tmp_nograd_bytes, analytic[i].fwd_tmp_nograd_bytes);
      EXPECT_EQ(est[i].bwd_tmp_bytes, analytic[i].bwd_tmp_bytes);
      EXPECT_EQ(est[i].carried_bytes, analytic[i].carried_bytes);
    }
  }
}

TEST(EstimateBytes, SdpaUsesTheFlashPathWhateverTheDropout) {
  auto c = small_config(gpt2::Attention::Sdpa, gpt2::Granularity::Block, 0.1);
  const auto est = gpt2_stage_bytes(c, kWorkload, Dtype::Fp32);
  c.attn_pdrop = 0.0;  // Note [GPU attention]
  const auto flash = gpt2_analytic_stages(c, kWorkload);
  for (size_t i = 0; i < est.size(); ++i) EXPECT_EQ(est[i].saved_bytes, flash[i].saved_bytes) << est[i].name;
}

TEST(EstimateBytes, Bf16HalvesFloatsButNotMasksStatsOrTheFp32Loss) {
  const auto c = small_config(gpt2::Attention::Explicit, gpt2::Granularity::Block, 0.1);
  const auto fp32 = gpt2_stage_bytes(c, kWorkload, Dtype::Fp32);
  const auto bf16 = gpt2_stage_bytes(c, kWorkload, Dtype::Bf16);
  const int64_t N = kWorkload.batch * kWorkload.seq_len, C = c.n_embd, V = c.vocab_size;
  const int64_t BHTT = kWorkload.batch * c.n_head * kWorkload.seq_len * kWorkload.seq_len;
  // embed: bool dropout mask (N C) + float output.
  EXPECT_EQ(bf16[0].saved_bytes, N * C + (fp32[0].saved_bytes - N * C) / 2);
  EXPECT_EQ(bf16[0].out_bytes, 2 * N * C);
  // block: two LayerNorms' fp32 mean and rstd, the attention mask, two residual masks.
  const int64_t block_fixed = 2 * (2 * N * 4) + BHTT + 2 * N * C;
  EXPECT_EQ(bf16[1].saved_bytes, block_fixed + (fp32[1].saved_bytes - block_fixed) / 2);
  EXPECT_EQ(bf16[1].out_bytes, fp32[1].out_bytes / 2);
  EXPECT_EQ(bf16[1].fwd_tmp_grad_bytes, fp32[1].fwd_tmp_grad_bytes / 2);
  EXPECT_EQ(bf16[1].bwd_tmp_bytes, fp32[1].bwd_tmp_bytes / 2);
  // head: the loss stays a 4-byte float; ln_f stats, fp32 log-probs, loss, total weight fixed.
  const size_t h = bf16.size() - 1;
  EXPECT_EQ(bf16[h].out_bytes, 4);
  const int64_t head_fixed = 2 * N * 4 + N * V * 4 + 8;
  EXPECT_EQ(bf16[h].saved_bytes, head_fixed + (fp32[h].saved_bytes - head_fixed) / 2);
  // Its backward peaks with the fp32 N x V gradients of the log-probabilities and the
  // logits (less the total weight, freed by then), above x_i, which halves.
  const int64_t head_bwd_fixed = 2 * N * V * 4 - 4;
  EXPECT_EQ(fp32[h].bwd_tmp_bytes, head_bwd_fixed - N * C * 4);
  EXPECT_EQ(bf16[h].bwd_tmp_bytes, head_bwd_fixed - N * C * 2);
  // fp16 and bf16 store the same bytes.
  const auto fp16 = gpt2_stage_bytes(c, kWorkload, Dtype::Fp16);
  for (size_t i = 0; i < bf16.size(); ++i) EXPECT_EQ(fp16[i].saved_bytes, bf16[i].saved_bytes);
}

// memopt's dropout saves no mask (Note [Kernel choice] in gpt2/config.h): in bf16 a
// block's fixed bytes are its LayerNorms' fp32 statistics alone, and its saved bytes
// are ATen's less the masks, the attention's B H T^2 and two residual N C.
TEST(EstimateBytes, Bf16WithMemoptKernelsKeepsNoMask) {
  auto c = small_config(gpt2::Attention::Explicit, gpt2::Granularity::Block, 0.1);
  const auto aten = gpt2_stage_bytes(c, kWorkload, Dtype::Bf16);
  c.kernels = gpt2::Kernels::Memopt;
  const auto fp32 = gpt2_stage_bytes(c, kWorkload, Dtype::Fp32);
  const auto bf16 = gpt2_stage_bytes(c, kWorkload, Dtype::Bf16);
  const int64_t N = kWorkload.batch * kWorkload.seq_len, C = c.n_embd;
  const int64_t BHTT = kWorkload.batch * c.n_head * kWorkload.seq_len * kWorkload.seq_len;
  EXPECT_EQ(bf16[0].saved_bytes, fp32[0].saved_bytes / 2);  // embed: the float output only
  const int64_t block_fixed = 2 * (2 * N * 4);
  EXPECT_EQ(bf16[1].saved_bytes, block_fixed + (fp32[1].saved_bytes - block_fixed) / 2);
  EXPECT_EQ(bf16[1].saved_bytes, aten[1].saved_bytes - BHTT - 2 * N * C);
}

// Each dropout of ATen's writes its bool mask, one byte per element; memopt's writes
// none, and nothing else in the forward changes.
TEST(Roofline, MemoptDropoutMovesNoMask) {
  auto c = small_config(gpt2::Attention::Explicit, gpt2::Granularity::Op, 0.1);
  const GpuSpec gpu = *gpu_spec("h100-80gb");
  const Estimate aten = estimate_gpt2({c, kWorkload, gpu, Dtype::Bf16, "", ""});
  c.kernels = gpt2::Kernels::Memopt;
  const Estimate memopt = estimate_gpt2({c, kWorkload, gpu, Dtype::Bf16, "", ""});
  const double N = 288, C = 64, BHTT = 110592;
  ASSERT_EQ(aten.fwd_bytes_moved.size(), memopt.fwd_bytes_moved.size());
  for (size_t i = 0; i < aten.fwd_bytes_moved.size(); ++i) {
    const std::string& name = aten.profile.chain.stages[i].name;
    SCOPED_TRACE(name);
    double mask = 0;
    if (name == "embed" || name.ends_with("c_proj")) mask = N * C;
    if (name.ends_with("attn.mix")) mask = BHTT;
    EXPECT_EQ(aten.fwd_bytes_moved[i] - memopt.fwd_bytes_moved[i], mask);
    EXPECT_EQ(aten.fwd_flop[i], memopt.fwd_flop[i]);
  }
  EXPECT_EQ(memopt.profile.model.value("kernels", ""), "memopt");
}

TEST(Roofline, MlpStageEqualsTheClosedForm) {
  // Sublayer granularity, no dropout: stage 2 (h.0.mlp) is ln_2, c_fc, gelu, c_proj, add.
  const auto c = small_config(gpt2::Attention::Explicit, gpt2::Granularity::Sublayer, 0.0);
  const GpuSpec gpu = *gpu_spec("a100-40gb");
  EstimateOptions o{c, kWorkload, gpu, Dtype::Bf16, "", ""};
  const Estimate est = estimate_gpt2(o);
  ASSERT_EQ(est.profile.chain.stages[2].name, "h.0.mlp");
  const double N = 288, C = 64, d = 2, P = 312e12, BW = 1555e9;
  auto t = [&](double flop, double bytes) { return std::max(flop / P, bytes / BW); };
  const double expected_s = t(0, d * 2 * N * C + 8 * N)                           // ln_2 (+ fp32 mean, rstd)
                            + t(2 * N * C * 4 * C, d * (N * C + C * 4 * C + N * 4 * C))  // c_fc
                            + t(0, d * 8 * N * C)                                  // gelu
                            + t(2 * N * 4 * C * C, d * (N * 4 * C + 4 * C * C + N * C))  // c_proj
                            + t(0, d * 3 * N * C);                                 // residual add
  // Same doubles summed in the same order: only the last bits may differ.
  EXPECT_NEAR(est.profile.chain.stages[2].fwd_ms, 1e3 * expected_s, 1e-12 * 1e3 * expected_s);
  EXPECT_DOUBLE_EQ(est.profile.chain.stages[2].bwd_ms, 2 * est.profile.chain.stages[2].fwd_ms);
}

TEST(Estimate, ProfileIsModeledWithLinkStaticAndJson) {
  const auto c = small_config(gpt2::Attention::Explicit, gpt2::Granularity::Block, 0.1);
  const GpuSpec gpu = *gpu_spec("h100-80gb");
  EstimateOptions o{c, kWorkload, gpu, Dtype::Bf16, "tiny-test", "memopt estimate ..."};
  const Estimate est = estimate_gpt2(o);
  EXPECT_FALSE(est.profile.measured);
  ASSERT_TRUE(est.profile.chain.link);
  EXPECT_EQ(est.profile.chain.link->d2h_bytes_per_s, 50e9);
  EXPECT_EQ(est.profile.static_bytes, 16 * gpt2_analytic_parameter_bytes(c) / 4);
  EXPECT_EQ(est.profile.chain.input_bytes, 8 * kWorkload.batch * kWorkload.seq_len);
  const nlohmann::json j = estimate_json(est, o);
  EXPECT_EQ(j.at("measured"), false);
  EXPECT_EQ(j.at("model").at("dtype"), "bfloat16");
  const solver::Profile back = solver::profile_from_json(j, "estimate");
  EXPECT_EQ(back.chain.stages.size(), est.profile.chain.stages.size());
  EXPECT_EQ(back.chain.stages[1].saved_bytes, est.profile.chain.stages[1].saved_bytes);
}

// The bundled example profile (tests/data) is what `memopt estimate` writes for the
// command it records, to the last digit: regenerate it with that command when the
// estimator changes.
TEST(Estimate, BundledExampleIsTheEstimatorsOutput) {
  const std::string file = std::string(MEMOPT_SOURCE_DIR) + "/tests/data/gpt2_small_example.profile.json";
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  const nlohmann::ordered_json committed = nlohmann::ordered_json::parse(in);
  const std::string command = committed.at("command");
  ASSERT_NE(command.find("--preset small --gpu a100-40gb --batch 8 --seq 1024"), std::string::npos) << command;
  const Gpt2Preset preset = *gpt2_preset("small");
  EstimateOptions o{preset.config, {8, 1024}, *gpu_spec("a100-40gb"), Dtype::Fp32, "small", command};
  const nlohmann::ordered_json fresh = estimate_json(estimate_gpt2(o), o);
  EXPECT_EQ(solver::format_json(fresh), solver::format_json(committed));
}

TEST(GpuTable, LookupAndErrors) {
  const auto v100 = gpu_spec("v100-16gb");
  ASSERT_TRUE(v100);
  EXPECT_EQ(v100->memory_bytes, 16 * kGiB);
  EXPECT_EQ(v100->fp16_flop_per_s, 125e12);
  EXPECT_EQ(v100->memory_bytes_per_s, 900e9);
  EXPECT_EQ(gpu_spec("h100-80gb")->bf16_flop_per_s, 989e12);
  EXPECT_EQ(gpu_spec("a100-80gb")->memory_bytes_per_s, 2039e9);
  EXPECT_FALSE(gpu_spec("tpu-v4"));
  for (const GpuSpec& g : kGpuSpecs) EXPECT_NE(gpu_words().find(std::string(g.word)), std::string::npos);
  EXPECT_EQ(peak_flop_per_s(*v100, Dtype::Fp16), 125e12);
  // Every GPU's link is a row of the link table; aliases land on a row of the GPU table.
  for (const GpuSpec& g : kGpuSpecs) EXPECT_TRUE(link_spec(g.link_word)) << g.word;
  for (const auto& [alias, target] : kGpuAliases) EXPECT_EQ(gpu_spec(alias)->word, target);
  EXPECT_EQ(gpu_link(*gpu_spec("gh200")).bytes_per_s, 360e9);
  EXPECT_EQ(gpu_link(*gpu_spec("h100-sxm")).name, "PCIe 5.0 x16");
  EXPECT_FALSE(link_spec("pcie6"));
  try {
    peak_flop_per_s(*v100, Dtype::Bf16);
    FAIL() << "V100 has no bf16";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dtype_from_word("bf16"), Dtype::Bf16);
  EXPECT_EQ(dtype_from_word("float32"), Dtype::Fp32);
  EXPECT_FALSE(dtype_from_word("int8"));
}

// Runs the built CLI; returns its exit status and puts stdout + stderr in `output`.
int run_cli(const std::string& args, std::string& output) {
  const std::string cmd = std::string(MEMOPT_BINARY_DIR) + "/tools/memopt " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) output += buf;
  return ::pclose(pipe);
}

TEST(EstimateCli, UnknownGpuListsTheKnownOnes) {
  std::string out;
  const int status = run_cli("estimate --preset small --gpu tpu-v9 --out /dev/null", out);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("unknown GPU 'tpu-v9'"), std::string::npos) << out;
  for (const GpuSpec& g : kGpuSpecs) EXPECT_NE(out.find(std::string(g.word)), std::string::npos) << out;
}

TEST(EstimateCli, Bf16OnV100SaysToUseFp16) {
  std::string out;
  EXPECT_NE(run_cli("estimate --preset small --gpu v100-16gb --dtype bf16 --out /dev/null", out), 0);
  EXPECT_NE(out.find("--dtype fp16"), std::string::npos) << out;
}

}  // namespace
}  // namespace memopt::gpt2

// link_emulation_test.cpp: `--emulate GPU:LINK` keeps the GPU's ratio of copy time to
// compute time -- checked against the modeled profile of `memopt estimate` for the
// same model on that GPU, an independent path through the roofline -- and refuses
// what it cannot emulate, naming the fix.
#include <string>

#include <gtest/gtest.h>

#include "gpt2/estimate.h"
#include "gpt2/link_emulation.h"
#include "solver/chain/chain.h"

namespace memopt::gpt2 {
namespace {

gpt2::Gpt2Spec small_spec() {
  gpt2::Gpt2Spec spec;
  spec.config.n_layer = 2;
  spec.config.n_embd = 64;
  spec.config.n_head = 4;
  spec.config.vocab_size = 300;
  spec.config.n_positions = 96;
  spec.config.granularity = gpt2::Granularity::Sublayer;
  spec.workload = {3, 96};
  return spec;
}

// A "measured" profile of the spec whose stages take `slowdown` times as long as on
// `gpu` (their roofline), unevenly: the first half of the stages twice that.
solver::Profile testbed_profile(const gpt2::Gpt2Spec& spec, const GpuSpec& gpu, double slowdown) {
  EstimateOptions o{spec.config, spec.workload, gpu, Dtype::Fp32, "", "test"};
  solver::Profile p = estimate_gpt2(o).profile;
  p.measured = true;
  p.model = gpt2_spec_to_json(spec);
  for (size_t i = 0; i < p.chain.stages.size(); ++i) {
    const double f = i < p.chain.stages.size() / 2 ? 2 * slowdown : slowdown;
    p.chain.stages[i].fwd_ms *= f;
    p.chain.stages[i].bwd_ms *= f;
  }
  return p;
}

double gpu_step_ms(const gpt2::Gpt2Spec& spec, const GpuSpec& gpu, Dtype dtype) {
  return solver::sum_fwd_bwd_ms(estimate_gpt2({spec.config, spec.workload, gpu, dtype, "", "test"}).profile.chain);
}

TEST(LinkEmulation, CopyOverComputeIsTheGpusOwn) {
  const gpt2::Gpt2Spec spec = small_spec();
  for (const char* text : {"h100-sxm:pcie5", "gh200:nvlink-c2c", "a100:pcie4", "v100-16gb"}) {
    SCOPED_TRACE(text);
    const std::string gpu_word = std::string(text).substr(0, std::string(text).find(':'));
    const GpuSpec gpu = *gpu_spec(gpu_word);
    const solver::Profile p = testbed_profile(spec, *gpu_spec("v100-16gb"), 700.0);
    const LinkEmulation e = emulate_link(p, text);
    const double link = gpu_link(gpu).bytes_per_s;
    EXPECT_EQ(e.link_bytes_per_s, link);
    // Any x bytes: x / emulated over the testbed's step = x / link over the GPU's step.
    const double testbed_ms = solver::sum_fwd_bwd_ms(p.chain), gpu_ms = gpu_step_ms(spec, gpu, Dtype::Fp32);
    EXPECT_NEAR(e.emulated_bytes_per_s, link * gpu_ms / testbed_ms, 1e-9 * e.emulated_bytes_per_s);
    EXPECT_NEAR(e.testbed_flop_per_s / e.gpu_flop_per_s, gpu_ms / testbed_ms, 1e-9);
  }
}

TEST(LinkEmulation, ABf16GpuMovesHalfTheTestbedsBytes) {
  const gpt2::Gpt2Spec spec = small_spec();
  const GpuSpec h100 = *gpu_spec("h100-80gb");
  const solver::Profile p = testbed_profile(spec, h100, 1000.0);
  const LinkEmulation e = emulate_link(p, "h100:pcie5:bf16");
  const double expected = 50e9 * gpu_step_ms(spec, h100, Dtype::Bf16) / solver::sum_fwd_bwd_ms(p.chain) * 2;
  EXPECT_NEAR(e.emulated_bytes_per_s, expected, 1e-9 * expected);
  EXPECT_EQ(e.dtype, "bf16");
}

TEST(LinkEmulation, TheProfileRecordsItAndUsesItBothWays) {
  const gpt2::Gpt2Spec spec = small_spec();
  solver::Profile p = testbed_profile(spec, *gpu_spec("h100-80gb"), 1000.0);
  const LinkEmulation e = emulate_link(p, "gh200");
  apply_link_emulation(p, e);
  ASSERT_TRUE(p.chain.link);
  EXPECT_EQ(p.chain.link->d2h_bytes_per_s, e.emulated_bytes_per_s);
  EXPECT_EQ(p.chain.link->h2d_bytes_per_s, e.emulated_bytes_per_s);
  EXPECT_EQ(p.device.at("link_emulation").at("gpu"), "gh200");
  EXPECT_EQ(p.device.at("link_emulation").at("link"), "nvlink-c2c");
  // What is written reads back.
  const solver::Profile back = solver::profile_from_json(solver::profile_to_json(p), "p.json");
  EXPECT_EQ(back.chain.link->d2h_bytes_per_s, e.emulated_bytes_per_s);
  EXPECT_EQ(back.device.at("link_emulation").at("emulated_bytes_per_s"), e.emulated_bytes_per_s);
}

TEST(LinkEmulation, RefusesWhatItCannotEmulateNamingTheFix) {
  const gpt2::Gpt2Spec spec = small_spec();
  const solver::Profile p = testbed_profile(spec, *gpu_spec("h100-80gb"), 1000.0);
  const std::pair<std::string, std::string> cases[] = {
      {"tpu:pcie5", "unknown GPU 'tpu'; known GPUs: v100-16gb"},
      {"h100:pcie9", "unknown link 'pcie9'; known links: pcie3, pcie4, pcie5, nvlink-c2c"},
      {"h100:pcie5:fp8", "unknown dtype 'fp8'"},
      {"", "expected GPU[:LINK[:DTYPE]]"},
      {"a:b:c:d", "expected GPU[:LINK[:DTYPE]]"},
  };
  for (const auto& [text, what] : cases) {
    try {
      emulate_link(p, text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  solver::Profile modeled = p;
  modeled.measured = false;
  EXPECT_THROW(emulate_link(modeled, "h100"), std::invalid_argument);
  solver::Profile fewer = p;
  fewer.chain.stages.pop_back();
  try {
    emulate_link(fewer, "h100");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("regenerate the profile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memopt::gpt2

// profiler_test.cpp: profiles are stable (same bytes twice), carry what the runtime
// needs to rebuild the model, and round-trip through the solver's reader.
#include <filesystem>

#include <gtest/gtest.h>

#include <unistd.h>

#include "gpt2/analytic.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"

namespace memopt::profiler {
namespace {

gpt2::Gpt2Spec small_spec(gpt2::Granularity g) {
  gpt2::Gpt2Spec spec;
  spec.config.n_layer = 2;
  spec.config.n_embd = 64;
  spec.config.n_head = 4;
  spec.config.vocab_size = 128;
  spec.config.n_positions = 32;
  spec.config.granularity = g;
  spec.workload = {2, 32};
  return spec;
}

solver::Profile profile_of(const gpt2::Gpt2Spec& spec) {
  model::StagedModel model = model::stage_gpt2(model::make_gpt2(spec));
  ProfileOptions options;
  options.repeat = 2;
  return profile_cpu(model, model::make_gpt2_batch(spec), gpt2::gpt2_spec_to_json(spec), options);
}

class ProfileTest : public ::testing::TestWithParam<gpt2::Granularity> {};

TEST_P(ProfileTest, TwoProfilesHaveIdenticalBytes) {
  const gpt2::Gpt2Spec spec = small_spec(GetParam());
  const solver::Profile a = profile_of(spec), b = profile_of(spec);
  EXPECT_EQ(a.chain.input_bytes, b.chain.input_bytes);
  EXPECT_EQ(a.static_bytes, b.static_bytes);
  ASSERT_EQ(a.chain.stages.size(), b.chain.stages.size());
  for (size_t i = 0; i < a.chain.stages.size(); ++i) {
    const solver::Stage &s = a.chain.stages[i], &t = b.chain.stages[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.out_bytes, t.out_bytes);
    EXPECT_EQ(s.saved_bytes, t.saved_bytes);
    EXPECT_EQ(s.fwd_tmp_bytes, t.fwd_tmp_bytes);
    EXPECT_EQ(s.bwd_tmp_bytes, t.bwd_tmp_bytes);
  }
}

TEST_P(ProfileTest, ProfileIsValidAndDescribesModelAndDevice) {
  const gpt2::Gpt2Spec spec = small_spec(GetParam());
  const solver::Profile p = profile_of(spec);
  EXPECT_EQ(solver::validate(p.chain), "");
  EXPECT_TRUE(p.measured);
  EXPECT_EQ(p.static_bytes, 4 * gpt2::gpt2_analytic_parameter_bytes(spec.config));
  EXPECT_EQ(p.chain.input_bytes, 8 * 2 * 32);
  EXPECT_EQ(p.chain.stages.back().out_bytes, 4);  // the scalar loss
  EXPECT_EQ(p.chain.loss.bwd_ms, 0.0);
  for (const solver::Stage& s : p.chain.stages) {
    EXPECT_GT(s.fwd_ms, 0.0) << s.name;
    EXPECT_GT(s.bwd_ms, 0.0) << s.name;
  }
  EXPECT_EQ(p.device.at("kind"), "cpu");
  EXPECT_EQ(p.device.at("threads"), 1);
  // The runtime rebuilds the model from "model".
  const gpt2::Gpt2Spec back = gpt2::gpt2_spec_from_json(p.model);
  EXPECT_EQ(gpt2::gpt2_spec_to_json(back), p.model);
  EXPECT_EQ(back.config.granularity, GetParam());
}

TEST_P(ProfileTest, RoundTripsThroughTheSolversReader) {
  const gpt2::Gpt2Spec spec = small_spec(GetParam());
  model::StagedModel model = model::stage_gpt2(model::make_gpt2(spec));
  ProfileOptions options;
  options.repeat = 1;
  const MeasuredProfile measured =
      profile_cpu_detailed(model, model::make_gpt2_batch(spec), gpt2::gpt2_spec_to_json(spec), options);
  const solver::Profile& p = measured.profile;
  const auto dir = std::filesystem::path(MEMOPT_BINARY_DIR) / "test_data";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / ("profile." + std::to_string(::getpid()) + ".json")).string();
  // With the extra per-stage fields, which the reader must ignore.
  const nlohmann::ordered_json written = profile_json(measured);
  EXPECT_TRUE(written.at("stages").at(0).contains("fwd_tmp_nograd_bytes"));
  solver::write_json_atomic(path, written);
  const solver::Profile q = solver::read_profile(path);
  std::filesystem::remove(path);
  EXPECT_EQ(solver::profile_to_json(q), solver::profile_to_json(p));
  ASSERT_EQ(q.chain.stages.size(), p.chain.stages.size());
  for (size_t i = 0; i < p.chain.stages.size(); ++i) {
    EXPECT_EQ(q.chain.stages[i].name, p.chain.stages[i].name);
    EXPECT_EQ(q.chain.stages[i].saved_bytes, p.chain.stages[i].saved_bytes);
    EXPECT_EQ(q.chain.stages[i].fwd_ms, p.chain.stages[i].fwd_ms);
  }
  EXPECT_EQ(q.model, p.model);
  EXPECT_EQ(q.device, p.device);
  EXPECT_EQ(q.static_bytes, p.static_bytes);
}

INSTANTIATE_TEST_SUITE_P(Gpt2, ProfileTest,
                         ::testing::Values(gpt2::Granularity::Block, gpt2::Granularity::Sublayer, gpt2::Granularity::Op),
                         [](const auto& info) { return std::string(gpt2::granularity_word(info.param)); });

TEST(Profiler, LeavesGradientsAndThreadsAsItFoundThem) {
  gpt2::Gpt2Spec spec = small_spec(gpt2::Granularity::Block);
  model::StagedModel model = model::stage_gpt2(model::make_gpt2(spec));
  model.train(false);
  const int threads = at::get_num_threads();
  ProfileOptions options;
  options.repeat = 1;
  options.threads = 1;
  int progress_calls = 0;
  options.on_progress = [&](int done, int total) {
    EXPECT_EQ(total, model.num_stages());
    EXPECT_EQ(done, progress_calls);
    ++progress_calls;
  };
  profile_cpu(model, model::make_gpt2_batch(spec), {}, options);
  EXPECT_EQ(progress_calls, model.num_stages() + 1);
  EXPECT_FALSE(model.is_training());
  EXPECT_EQ(at::get_num_threads(), threads);
  for (const at::Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace memopt::profiler

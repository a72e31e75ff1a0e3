// cuda_training_test.cpp: scheduled training on a GPU against plain training there --
// the tiny GPT-2 with dropout, profiled with CUDA events and the caching allocator's
// requested bytes, then stepped along store-all, recompute, offload and saved-state
// offload plans through the CUDA copy engine. Gradients equal plain autograd's bit for
// bit with deterministic algorithms on; each measured peak equals the simulator's to
// the byte. Built only with MEMOPT_CUDA; every test skips itself without a visible
// device.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "measure/backend.h"
#include "model/device.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"
#include "runtime/copy_engine.h"
#include "runtime/copy_plan.h"
#include "runtime/rng_state.h"
#include "runtime/train_step.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "tests/runtime/hand_plans.h"

namespace memopt::runtime {
namespace {

class CudaTraining : public ::testing::TestWithParam<std::tuple<gpt2::Attention, gpt2::Granularity>> {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device visible";
    // cuBLAS picks a reduction order per call unless its workspace is fixed.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    spec.config = gpt2::gpt2_preset("tiny")->config;
    spec.workload = gpt2::gpt2_preset("tiny")->workload;
    spec.config.set_dropout(0.1);
    spec.config.attention = std::get<0>(GetParam());
    spec.config.granularity = std::get<1>(GetParam());
    spec.workload.batch = 2;
    spec.workload.seq_len = 64;
    model = std::make_unique<model::StagedModel>(model::stage_gpt2(model::make_gpt2(spec)));
    batch = model::make_gpt2_batch(spec);
    model::move_to(*model, batch, device);
    model->train(true);
    profiler::ProfileOptions options;
    options.repeat = 1;
    profile = profiler::profile_on(measure::Backend::Cuda, *model, batch, gpt2::gpt2_spec_to_json(spec), options)
                  .measured.profile;
    const LinkBandwidth link = measure_copy_bandwidth(0, 0, 8 << 20, 3, device);
    profile.chain.link = solver::Link{link.d2h_bytes_per_s, link.h2d_bytes_per_s};
    meter = measure::make_memory_meter(measure::Backend::Cuda);
    timer = measure::make_timer(measure::Backend::Cuda);
  }
  void TearDown() override { at::globalContext().setDeterministicAlgorithms(false, false); }

  // The step along `ops` and the plain step from the same generator states:
  // gradients and loss bit for bit, the measured peak the simulator's.
  void expect_like_plain_training(const std::vector<solver::Op>& ops, const std::string& what) {
    SCOPED_TRACE(what);
    const solver::SimResult predicted = solver::simulate_timeline(profile.chain, ops);
    ASSERT_TRUE(predicted.valid) << predicted.error;
    ExecutorOptions options;
    std::unique_ptr<CopyEngine> engine;
    if (const auto copies = plan_copies(profile.chain, ops, what)) {
      engine = make_copy_engine(device, copies->engine);
      options.copy_engine = engine.get();
      options.offload_done_before = copies->offload_done_before;
    }
    const RngState rng = rng_state(device);
    zero_grads_in_place(*model);
    const StepResult scheduled = run_scheduled_step(*model, ops, batch, *meter, options, timer.get());
    if (engine) engine->finish_step();
    const std::vector<at::Tensor> scheduled_grads = gradients(*model);
    set_rng_state(rng);
    zero_grads_in_place(*model);
    const StepResult plain = run_plain_step(*model, batch, *meter, timer.get());
    const GradientDiff diff = compare_gradients(scheduled_grads, gradients(*model));
    EXPECT_EQ(diff.max_abs_diff, 0.0) << "largest |gradient| " << diff.max_abs_ref;
    EXPECT_EQ(scheduled.loss, plain.loss);
    EXPECT_EQ(scheduled.activation_peak_bytes, predicted.peak_bytes);
    EXPECT_GT(scheduled.time_ms, 0.0);
  }

  const c10::Device device{c10::kCUDA, 0};
  gpt2::Gpt2Spec spec;
  std::unique_ptr<model::StagedModel> model;
  model::Batch batch;
  solver::Profile profile;
  std::unique_ptr<measure::MemoryMeter> meter;
  std::unique_ptr<measure::Timer> timer;
};

TEST_P(CudaTraining, StoreAllAndRecomputePlansMatchPlainTraining) {
  const solver::Chain& chain = profile.chain;
  expect_like_plain_training(solver::store_all_ops(chain), "store-all");
  expect_like_plain_training(solver::recompute_blocks_ops(chain), "recompute-blocks");
  const int64_t budget = solver::store_all_peak_bytes(chain) * 6 / 10;
  expect_like_plain_training(solver::solve(chain, {budget, solver::SolverKind::RecomputeOnly}).ops,
                             "recompute-only at 60%");
}

TEST_P(CudaTraining, OffloadPlansMatchPlainTraining) {
  const solver::Chain& chain = profile.chain;
  expect_like_plain_training(solver::solve(chain, {1LL << 50, solver::SolverKind::OffloadAll}).ops, "offload-all");
  // Note [Host scalars stay] in runtime/saved_state.cpp: with sdpa, the saved state
  // holds CPU seeds beside the device tensors.
  std::vector<bool> moved;
  expect_like_plain_training(testing::keep_and_move_every_saved_state(chain, moved, /*inputs=*/true),
                             "every saved state and input moved");
  const int64_t budget = solver::store_all_peak_bytes(chain) * 4 / 10;
  expect_like_plain_training(solver::solve(chain, {budget, solver::SolverKind::Optimal}).ops, "optimal at 40%");
}

// Two scheduled steps from the same state are bit-identical, recomputation included.
TEST_P(CudaTraining, TwoScheduledStepsAreBitIdentical) {
  const std::vector<solver::Op> ops = solver::recompute_blocks_ops(profile.chain);
  const RngState rng = rng_state(device);
  zero_grads_in_place(*model);
  const StepResult first = run_scheduled_step(*model, ops, batch, *meter, {}, timer.get());
  const std::vector<at::Tensor> grads = gradients(*model);
  set_rng_state(rng);
  zero_grads_in_place(*model);
  const StepResult second = run_scheduled_step(*model, ops, batch, *meter, {}, timer.get());
  EXPECT_EQ(first.loss, second.loss);
  EXPECT_EQ(compare_gradients(grads, gradients(*model)).max_abs_diff, 0.0);
}

std::string param_name(const ::testing::TestParamInfo<CudaTraining::ParamType>& info) {
  return std::string(gpt2::attention_word(std::get<0>(info.param))) + "_" +
         gpt2::granularity_word(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AttentionAndGranularity, CudaTraining,
                         ::testing::Combine(::testing::Values(gpt2::Attention::Explicit, gpt2::Attention::Sdpa),
                                            ::testing::Values(gpt2::Granularity::Block, gpt2::Granularity::Op)),
                         param_name);

}  // namespace
}  // namespace memopt::runtime

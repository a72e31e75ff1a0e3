// stage_timing_test.cpp: stage times taken inside training steps -- one per stage and
// op, positive -- and the model left as it was found (gradients, generator, mode,
// threads), so that profiling changes nothing a later step sees.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "measure/wall_clock_tracer.h"
#include "runtime/executor.h"
#include "solver/dp/baselines.h"
#include "runtime/stage_timing.h"
#include "tests/runtime/runtime_fixture.h"

namespace memopt::runtime {
namespace {

TEST(StageTiming, TimesEveryStageAndLeavesTheModelAsItWas) {
  testing::TinyTrainer trainer;
  solver::Chain chain = trainer.profile().chain;
  trainer.step(solver::store_all_ops(chain));  // gradients defined and non-zero
  const std::vector<at::Tensor> grads_before = [&] {
    std::vector<at::Tensor> g;
    for (const at::Tensor& p : trainer.model->parameters()) g.push_back(p.grad().clone());
    return g;
  }();
  const std::vector<at::Tensor> params_before = trainer.parameters();
  at::set_num_threads(2);
  trainer.model->train(false);
  const CpuRngState rng = cpu_rng_state();
  const at::Tensor draw_before = at::rand({8});
  set_cpu_rng_state(rng);

  StageTimingOptions options;
  options.warmup_rounds = 1;
  options.rounds = 2;
  options.threads = 1;
  const StageTimes t = time_stages_in_steps(*trainer.model, trainer.batch, chain, options);

  ASSERT_EQ(static_cast<int>(t.fwd_ms.size()), chain.length());
  for (int i = 0; i < chain.length(); ++i) {
    EXPECT_GT(t.fwd_ms[i], 0) << i;
    EXPECT_GT(t.bwd_ms[i], 0) << i;
    EXPECT_GT(t.fwd_nograd_ms[i], 0) << i;
    EXPECT_GT(t.fwd_bwd_pair_ms[i], 0) << i;
  }
  EXPECT_EQ(t.fwd_nograd_ms.back(), t.fwd_ms.back());  // the last stage never runs without grad
  // ... nor back to back, so its pair is its store-all sum; the others were timed
  // apart (medians over other instances are never the same doubles).
  EXPECT_EQ(t.fwd_bwd_pair_ms.back(), t.fwd_ms.back() + t.bwd_ms.back());
  EXPECT_NE(t.fwd_bwd_pair_ms[0], t.fwd_ms[0] + t.bwd_ms[0]);
  EXPECT_TRUE(testing::identical(trainer.parameters(), params_before));
  std::vector<at::Tensor> grads_after;
  for (const at::Tensor& p : trainer.model->parameters()) grads_after.push_back(p.grad());
  EXPECT_TRUE(testing::identical(grads_after, grads_before));
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_FALSE(trainer.model->is_training());
  EXPECT_TRUE(at::equal(at::rand({8}), draw_before));

  apply_stage_times(chain, t);
  EXPECT_EQ(chain.stages[0].fwd_ms, t.fwd_ms[0]);
  EXPECT_EQ(chain.stages[0].fwd_nograd_ms, t.fwd_nograd_ms[0]);
  EXPECT_EQ(chain.stages[0].fwd_bwd_pair_ms, t.fwd_bwd_pair_ms[0]);
  EXPECT_EQ(chain.stages.back().bwd_ms, t.bwd_ms.back());
  solver::Chain shorter = chain;
  shorter.stages.pop_back();
  EXPECT_THROW(apply_stage_times(shorter, t), std::invalid_argument);
  at::set_num_threads(1);
}

// Medians per stage and op of what the tracers recorded, by label; the pair is the
// checkpointing steps' fwd_keep and bwd medians; a stage never checkpointed (the last)
// takes its store-all times.
TEST(StageTiming, MediansOfTheTimedOpsByStage) {
  measure::WallClockTracer store_all, checkpointed;
  const auto add = [](measure::WallClockTracer& t, const std::string& op, const std::string& stage,
                      std::vector<double> ms) {
    for (double v : ms) t.timed.push_back({measure::range_label(op, stage), v});
  };
  add(store_all, "fwd_keep", "a", {3, 1, 2});
  add(store_all, "bwd", "a", {5, 9, 7, 8});
  add(store_all, "fwd_keep", "b", {4});
  add(store_all, "bwd", "b", {6, 6});
  add(checkpointed, "fwd_ckpt", "a", {0.5, 1.5, 1.0});
  add(checkpointed, "fwd_keep", "a", {1.5});
  add(checkpointed, "bwd", "a", {6.0, 7.0});
  add(checkpointed, "fwd_keep", "b", {100});  // not checkpointed: never read
  const StageTimes t = stage_times_from({"a", "b"}, store_all, checkpointed);
  EXPECT_EQ(t.fwd_ms, (std::vector<double>{2, 4}));
  EXPECT_EQ(t.bwd_ms, (std::vector<double>{7.5, 6}));
  EXPECT_EQ(t.fwd_nograd_ms, (std::vector<double>{1.0, 4}));
  EXPECT_EQ(t.fwd_bwd_pair_ms, (std::vector<double>{1.5 + 6.5, 4 + 6}));
  EXPECT_THROW(stage_times_from({"a", "c"}, store_all, checkpointed), std::logic_error);
}

}  // namespace
}  // namespace memopt::runtime

// determinism_test.cpp: determinism is correctness -- two runs of the same profile,
// schedule and seed give bit-identical losses and parameters over several AdamW steps,
// and equal plain training bit for bit; which fails when a recomputed forward draws
// its dropout mask from a stale RNG state (ExecutorOptions::restore_rng = false, and
// equally if the restoration in executor.cpp were removed).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "runtime/executor.h"
#include "solver/search/solve.h"
#include "tests/runtime/runtime_fixture.h"

namespace memopt::runtime {
namespace {

using testing::identical;
using testing::TinyTrainer;

constexpr int kSteps = 3;

struct TrainingRun {
  std::vector<double> losses;
  std::vector<at::Tensor> parameters;
};

// kSteps AdamW steps along `ops` from the RNG state `rng`, on a fresh model from the spec's seed.
TrainingRun train(const std::vector<solver::Op>* ops, const CpuRngState& rng, const ExecutorOptions& options = {}) {
  TinyTrainer t;
  set_cpu_rng_state(rng);
  TrainingRun run;
  for (int step = 0; step < kSteps; ++step) {
    if (ops) {
      run.losses.push_back(t.step(*ops, options));
    } else {  // plain autograd on the whole chain
      measure::CpuMemoryMeter meter;
      zero_grads_in_place(*t.model);
      run.losses.push_back(run_plain_step(*t.model, t.batch, meter).loss);
      t.optimizer->step();
    }
  }
  run.parameters = t.parameters();
  return run;
}

class Determinism : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);  // Note [Scheduled equals plain, bit for bit] in executor_test.cpp
    const solver::Chain chain = TinyTrainer().profile().chain;
    // The smallest budget recompute-only meets: the most recomputation, so every
    // dropout layer but the last stage's is run twice with its mask drawn again.
    const int64_t budget = solver::min_feasible_budget(chain, {0, solver::SolverKind::RecomputeOnly});
    schedule = solver::solve(chain, {budget, solver::SolverKind::RecomputeOnly});
    int recomputed = 0;
    for (const solver::Op& op : schedule.ops) recomputed += op.kind == solver::OpKind::FwdCkpt;
    ASSERT_GT(recomputed, 0) << "the schedule recomputes nothing, so it cannot test RNG restoration";
    rng = cpu_rng_state();
  }
  solver::Schedule schedule;
  CpuRngState rng;
};

TEST_F(Determinism, TwoRunsOfTheSameScheduleAndSeedAreBitIdentical) {
  const TrainingRun a = train(&schedule.ops, rng);
  const TrainingRun b = train(&schedule.ops, rng);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_TRUE(identical(a.parameters, b.parameters));
}

TEST_F(Determinism, ScheduledTrainingEqualsPlainTrainingBitForBit) {
  const TrainingRun scheduled = train(&schedule.ops, rng);
  const TrainingRun plain = train(nullptr, rng);
  EXPECT_EQ(scheduled.losses, plain.losses);
  EXPECT_TRUE(identical(scheduled.parameters, plain.parameters));
}

// The same comparison with restoration switched off must fail: a recompute with a
// stale RNG state draws a different dropout mask, so gradients and parameters move.
TEST_F(Determinism, AStaleRngOnRecomputeIsDetected) {
  ExecutorOptions stale;
  stale.restore_rng = false;
  const TrainingRun scheduled = train(&schedule.ops, rng, stale);
  const TrainingRun plain = train(nullptr, rng);
  EXPECT_FALSE(identical(scheduled.parameters, plain.parameters));
}

}  // namespace
}  // namespace memopt::runtime

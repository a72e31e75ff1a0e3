// measured_run_test.cpp: the measurement protocol behind `memopt run` and `memopt
// tradeoff --run` -- warm-up steps, then schedules in interleaved rounds, each
// schedule's peak equal to the simulator's, and steady-state steps served entirely by
// the caching allocator (no allocation reaches the system).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Context.h>

#include "measure/backend.h"
#include "measure/cpu_allocator.h"
#include "runtime/measured_run.h"
#include "runtime/op_times.h"
#include "runtime/stage_timing.h"
#include "solver/chain/op_context.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "tests/runtime/runtime_fixture.h"

namespace memopt::runtime {
namespace {

// store-all's and recompute-all's schedules at the store-all peak: the two ends.
std::vector<solver::Schedule> store_all_and_recompute_all(const solver::Chain& chain) {
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  return {solver::solve(chain, {store_all, solver::SolverKind::StoreAll, 500, 1, false}),
          solver::solve(chain, {store_all, solver::SolverKind::RecomputeAll, 500, 1, false})};
}

TEST(MeasurementProtocol, WarmsUpThenInterleavesAndPeaksAreThePredictedOnes) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  const solver::Chain& chain = profile.chain;
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  std::vector<solver::Schedule> schedules;
  for (const auto& [kind, fraction] : {std::pair{solver::SolverKind::StoreAll, 1.0},
                                       std::pair{solver::SolverKind::RecomputeAll, 1.0},
                                       std::pair{solver::SolverKind::Optimal, 0.6}})
    schedules.push_back(
        solver::solve(chain, {static_cast<int64_t>(fraction * static_cast<double>(store_all)), kind, 500, 1, false}));

  ProfiledModel model(profile);
  MeasureOptions options;
  options.warmup_steps = 2;
  options.steps = 3;
  std::vector<std::pair<int, int>> order;  // (schedule, step) as run
  std::vector<int64_t> system_allocations;  // after each step
  options.on_step = [&](int k, const StepMeasurement& m) {
    order.emplace_back(k, m.step);
    system_allocations.push_back(measure::counting_cpu_allocator().num_system_allocations());
  };
  const auto results = model.measure_interleaved(chain, schedules, options, {"a", "b", "c"});

  // Rounds: every schedule once per round, in order, warm-up rounds first.
  std::vector<std::pair<int, int>> expected;
  for (int step = 1; step <= 5; ++step)
    for (int k = 0; k < 3; ++k) expected.emplace_back(k, step);
  EXPECT_EQ(order, expected);
  ASSERT_EQ(results.size(), 3u);
  for (size_t k = 0; k < results.size(); ++k) {
    SCOPED_TRACE(schedules[k].solver);
    const ScheduleMeasurement& r = results[k];
    ASSERT_EQ(r.steps.size(), 5u);
    EXPECT_TRUE(r.steps[0].warmup && r.steps[1].warmup && !r.steps[2].warmup);
    // Exact: measured peaks are the simulator's, on every measured step.
    const int64_t predicted = solver::simulate_timeline(chain, schedules[k].ops).peak_bytes;
    for (const StepMeasurement& m : r.steps) EXPECT_EQ(m.activation_peak_bytes, predicted) << "step " << m.step;
    EXPECT_EQ(r.median_peak_bytes, predicted);
    EXPECT_GE(r.reserved_peak_bytes, r.median_peak_bytes);
    EXPECT_LE(r.time_ms.q25, r.time_ms.median);
    EXPECT_LE(r.time_ms.median, r.time_ms.q75);
  }
  // After the warm-up every block any schedule needs is cached: the measured rounds
  // never reach the system for memory.
  ASSERT_EQ(system_allocations.size(), 15u);
  EXPECT_EQ(system_allocations[5], system_allocations.back());  // after the last warm-up step
}

// op_time_rows on given durations: the loss is skipped, each row is the median over
// the steps of that step's sum, and a step with a wrong count is refused.
TEST(OpTimeRows, MediansOfPerStepSumsWithTheLossSkipped) {
  solver::Chain chain;
  chain.stages.resize(2);
  chain.stages[0].fwd_ms = 1.0;
  chain.stages[0].bwd_ms = 2.0;
  chain.stages[0].fwd_nograd_ms = 0.5;
  chain.stages[1].fwd_ms = 3.0;
  chain.stages[1].bwd_ms = 4.0;
  using solver::Op;
  using solver::OpKind;
  // fwd_ckpt 0, fwd_keep 1, loss, bwd 1, fwd_keep 0, bwd 0
  const std::vector<Op> ops = {{OpKind::FwdCkpt, 0}, {OpKind::FwdKeep, 1}, {OpKind::Loss, -1},
                               {OpKind::Bwd, 1},     {OpKind::FwdKeep, 0}, {OpKind::Bwd, 0}};
  const std::vector<std::vector<double>> steps = {
      {0.6, 3.1, 4.2, 1.1, 2.3}, {0.4, 2.9, 4.0, 0.9, 1.9}, {0.5, 3.3, 4.4, 1.0, 2.0}};
  const std::vector<OpTimeRow> rows = op_time_rows(chain, ops, steps);
  ASSERT_EQ(rows.size(), 5u);
  const solver::OpContext expected[] = {solver::OpContext::ForwardKeep, solver::OpContext::ForwardNoGrad,
                                        solver::OpContext::RecomputeKeep, solver::OpContext::BwdOfKept,
                                        solver::OpContext::BwdAfterItsKeep};
  const double measured[] = {3.1, 0.5, 1.0, 4.2, 2.0};
  const double predicted[] = {3.0, 0.5, 1.0, 4.0, 2.0};
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].context, expected[r]);
    EXPECT_EQ(rows[r].num_ops, 1);
    EXPECT_DOUBLE_EQ(rows[r].measured_ms, measured[r]);
    EXPECT_DOUBLE_EQ(rows[r].predicted_ms, predicted[r]);
  }
  EXPECT_THROW(op_time_rows(chain, ops, {{1.0, 2.0}}), std::invalid_argument);
}

// With `op_times`, each measured step's ops are timed and split by where they ran: the
// rows cover every compute op but the loss, their predicted times add up to the
// simulator's step (nothing copies, so nothing stalls), and in every step a row's ops
// take part of the step, so their median is at most the step's.
TEST(MeasurementProtocol, OpTimesSplitEveryComputeOpByWhereItRan) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  const solver::Chain& chain = profile.chain;
  const std::vector<solver::Schedule> schedules = store_all_and_recompute_all(chain);
  ProfiledModel model(profile);
  MeasureOptions options;
  options.warmup_steps = 1;
  options.steps = 3;
  const auto untimed = model.measure_interleaved(chain, schedules, options, {"a", "b"});
  for (const ScheduleMeasurement& r : untimed) EXPECT_TRUE(r.op_times.empty());
  options.op_times = true;
  const auto timed = model.measure_interleaved(chain, schedules, options, {"a", "b"});
  const int L = chain.length();
  for (size_t k = 0; k < schedules.size(); ++k) {
    SCOPED_TRACE(schedules[k].solver);
    int num_ops = 0;
    double predicted_ms = 0;
    for (const OpTimeRow& row : timed[k].op_times) {
      num_ops += row.num_ops;
      predicted_ms += row.predicted_ms;
      EXPECT_GT(row.measured_ms, 0.0) << solver::context_word(row.context);
      // In each step these ops take part of the step, so their median is at most the step's.
      EXPECT_LE(row.measured_ms, timed[k].time_ms.median) << solver::context_word(row.context);
    }
    EXPECT_EQ(num_ops, static_cast<int>(schedules[k].ops.size()) - 1);
    const double simulated_ms = solver::simulate_timeline(chain, schedules[k].ops).time_ms;
    EXPECT_NEAR(predicted_ms + chain.loss.bwd_ms, simulated_ms, 1e-9 * simulated_ms);  // summation order only
  }
  // store-all: L forwards before the loss and L backwards of kept stages, nothing else.
  ASSERT_EQ(timed[0].op_times.size(), 2u);
  EXPECT_EQ(timed[0].op_times[0].context, solver::OpContext::ForwardKeep);
  EXPECT_EQ(timed[0].op_times[1].context, solver::OpContext::BwdOfKept);
  EXPECT_EQ(timed[0].op_times[1].num_ops, L);
  // recompute-all: every backward follows its stage's recomputation.
  bool any_kept_bwd = false;
  for (const OpTimeRow& row : timed[1].op_times) any_kept_bwd |= row.context == solver::OpContext::BwdOfKept;
  EXPECT_FALSE(any_kept_bwd);
}

// Note [Stage times from the measured rounds]: the timing steps are steps of their
// own, so the measured ones run in the same order and number as without them, and
// every stage gets its times, taken from the timing steps alone.
TEST(MeasurementProtocol, StageTimesFromTheRoundsComeFromStepsOfTheirOwn) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  const solver::Chain& chain = profile.chain;
  const std::vector<solver::Schedule> schedules = store_all_and_recompute_all(chain);
  ProfiledModel model(profile);
  MeasureOptions options;
  options.warmup_steps = 1;
  options.steps = 3;
  std::vector<std::pair<int, int>> order;
  options.on_step = [&](int k, const StepMeasurement& m) { order.emplace_back(k, m.step); };
  StageTimes in_rounds;
  options.stage_times_in_rounds = &in_rounds;
  const auto results = model.measure_interleaved(chain, schedules, options, {"a", "b"});
  std::vector<std::pair<int, int>> expected;
  for (int step = 1; step <= 4; ++step)
    for (int k = 0; k < 2; ++k) expected.emplace_back(k, step);
  EXPECT_EQ(order, expected);
  for (const ScheduleMeasurement& r : results) {
    EXPECT_EQ(r.steps.size(), 4u);
    EXPECT_TRUE(r.op_times.empty());  // the measured steps stay untraced
  }
  const int L = chain.length();
  ASSERT_EQ(static_cast<int>(in_rounds.fwd_ms.size()), L);
  for (int i = 0; i < L; ++i) {
    EXPECT_GT(in_rounds.fwd_ms[i], 0) << i;
    EXPECT_GT(in_rounds.bwd_ms[i], 0) << i;
    EXPECT_GT(in_rounds.fwd_nograd_ms[i], 0) << i;
    EXPECT_GT(in_rounds.fwd_bwd_pair_ms[i], 0) << i;
  }
  EXPECT_EQ(in_rounds.fwd_nograd_ms.back(), in_rounds.fwd_ms.back());  // the last stage: its store-all times
  EXPECT_EQ(in_rounds.fwd_bwd_pair_ms.back(), in_rounds.fwd_ms.back() + in_rounds.bwd_ms.back());
}

// With `check`, the warm-up steps are compared with plain autograd (one is added where
// there are none) and the measured steps run as they would without it, with
// deterministic algorithms back off (Note [The warm-up steps are the checked ones]).
TEST(MeasurementProtocol, CheckComparesTheWarmUpStepsAndLeavesTheMeasuredOnesAlone) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  const solver::Chain& chain = profile.chain;
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  const std::vector<solver::Schedule> schedules = {
      solver::solve(chain, {store_all * 6 / 10, solver::SolverKind::Optimal, 500, 1, false})};
  ProfiledModel model(profile);
  const bool deterministic_before = at::globalContext().deterministicAlgorithms();
  for (const int warmup_steps : {0, 2}) {
    SCOPED_TRACE(warmup_steps);
    MeasureOptions options;
    options.warmup_steps = warmup_steps;
    options.steps = 2;
    options.check = true;
    bool deterministic_in_measured_steps = false;
    options.on_step = [&](int, const StepMeasurement& m) {
      if (!m.warmup) deterministic_in_measured_steps |= at::globalContext().deterministicAlgorithms();
    };
    const auto r = model.measure_interleaved(chain, schedules, options, {"a"});
    const int checked_steps = std::max(warmup_steps, 1);
    ASSERT_EQ(r[0].steps.size(), static_cast<size_t>(checked_steps + 2));
    for (size_t i = 0; i < r[0].steps.size(); ++i) {
      const StepMeasurement& m = r[0].steps[i];
      const bool warmup = static_cast<int>(i) < checked_steps;
      EXPECT_EQ(m.warmup, warmup) << i;
      EXPECT_EQ(m.checked, warmup) << i;
      if (warmup) {
        EXPECT_EQ(m.max_abs_grad_diff, 0.0) << i;  // the recomputation is exact
      }
    }
    EXPECT_EQ(r[0].max_abs_grad_diff, 0.0);
    EXPECT_FALSE(deterministic_in_measured_steps);
    EXPECT_EQ(at::globalContext().deterministicAlgorithms(), deterministic_before);
  }
}

// With `trace`, one more step per schedule runs every op in its range; the measured
// steps stay untraced. On the CPU the ranges carry no device activity.
TEST(MeasurementProtocol, ATracedStepAfterTheRoundsNamesEveryOp) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  const solver::Chain& chain = profile.chain;
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  const std::vector<solver::Schedule> schedules = {
      solver::solve(chain, {store_all, solver::SolverKind::StoreAll, 500, 1, false}),
      solver::solve(chain, {store_all * 6 / 10, solver::SolverKind::Optimal, 500, 1, false})};
  ProfiledModel model(profile);
  MeasureOptions options;
  options.warmup_steps = 0;
  options.steps = 1;
  const auto untraced = model.measure_interleaved(chain, schedules, options, {"a", "b"});
  for (const ScheduleMeasurement& r : untraced) EXPECT_FALSE(r.trace.has_value());
  options.trace = true;
  const auto traced = model.measure_interleaved(chain, schedules, options, {"a", "b"});
  for (size_t k = 0; k < schedules.size(); ++k) {
    SCOPED_TRACE(schedules[k].solver);
    ASSERT_TRUE(traced[k].trace.has_value());
    EXPECT_EQ(traced[k].steps.size(), 1u);  // the traced step is not a measured one
    int instances = 0;
    std::vector<std::string> words;
    for (const measure::RangeReport& r : traced[k].trace->ranges) {
      instances += r.num_instances;
      words.push_back(r.op);
    }
    // The loss op only turns the forward into the backward: no work, no range.
    EXPECT_EQ(instances, static_cast<int>(schedules[k].ops.size()) - 1);
    for (const solver::Op& op : schedules[k].ops) {
      if (op.kind != solver::OpKind::Loss) {
        EXPECT_NE(std::find(words.begin(), words.end(), solver::info(op.kind).word), words.end())
            << solver::info(op.kind).word;
      }
    }
    EXPECT_EQ(traced[k].trace->copy_busy_ms, 0.0);
  }
}

TEST(MeasurementProtocol, RefusesNonsenseCounts) {
  const solver::Profile profile = testing::TinyTrainer().profile();
  ProfiledModel model(profile);
  const solver::Schedule s = solver::solve(profile.chain, {solver::store_all_peak_bytes(profile.chain),
                                                           solver::SolverKind::StoreAll, 500, 1, false});
  MeasureOptions options;
  options.steps = 0;
  EXPECT_THROW(model.measure(profile.chain, s, options), std::invalid_argument);
  options.steps = 1;
  options.warmup_steps = -1;
  EXPECT_THROW(model.measure(profile.chain, s, options), std::invalid_argument);
}

// A profile measured on a GPU trains on a GPU by default: where none can run, the
// run is refused before anything is built, naming the fix -- never trained silently
// on the CPU. Asked for explicitly, the CPU trains it.
TEST(MeasurementProtocol, ACudaProfileRunsOnCudaOrSaysWhyNot) {
  solver::Profile profile = testing::TinyTrainer().profile();
  EXPECT_EQ(ProfiledModel(profile).backend(), measure::Backend::Cpu);
  profile.device["kind"] = "cuda";
  if (measure::cuda_backend_built() && at::hasCUDA()) GTEST_SKIP() << "a CUDA device is visible";
  try {
    ProfiledModel model(profile);
    FAIL() << "a cuda profile was accepted without a GPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ProfiledModel(profile, 0, 0, measure::Backend::Cpu).backend(), measure::Backend::Cpu);
}

}  // namespace
}  // namespace memopt::runtime

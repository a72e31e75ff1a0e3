// executor_test.cpp: scheduled training steps against plain autograd on the tiny
// GPT-2, for every solver at budgets from the smallest that works to store-all, at
// every granularity (blocks, half-blocks, operator stages) and both kernel choices (and the chunked loss), with dropout on (with memopt's kernels
// a recomputation must regenerate each dropout mask from its Philox key, so
// "scheduled equals plain, bit for bit" covers that too), with and without offloading:
// gradients equal plain training bit for bit, peaks equal the prediction to the byte.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "measure/cpu_allocator.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"
#include "runtime/copy_plan.h"
#include "runtime/executor.h"
#include "runtime/host_arena.h"
#include "tests/runtime/hand_plans.h"
#include "runtime/train_step.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/coarsen.h"
#include "solver/dp/offload.h"
#include "solver/chain/plan_edits.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"

namespace memopt::runtime {
namespace {

using testing::keep_and_move_every_saved_state;
using testing::with_waits;

using solver::SolverKind;

struct TinyGpt2 {
  gpt2::Gpt2Spec spec;
  model::Gpt2 gpt2{nullptr};
  std::unique_ptr<model::StagedModel> model;
  model::Batch batch;
  solver::Profile profile;

  explicit TinyGpt2(std::tuple<gpt2::Granularity, gpt2::Kernels, gpt2::Loss> param) {
    spec.config = gpt2::gpt2_preset("tiny")->config;
    spec.workload = gpt2::gpt2_preset("tiny")->workload;
    spec.config.granularity = std::get<0>(param);
    spec.config.kernels = std::get<1>(param);
    spec.config.loss = std::get<2>(param);
    spec.config.set_dropout(0.1);
    // Small enough that the suite stays quick on two cores, large enough that
    // activations dwarf allocator noise.
    spec.workload.batch = 2;
    spec.workload.seq_len = 64;
    gpt2 = model::make_gpt2(spec);
    model = std::make_unique<model::StagedModel>(model::stage_gpt2(gpt2));
    batch = model::make_gpt2_batch(spec);
    profiler::ProfileOptions options;
    options.repeat = 1;
    profile = profiler::profile_cpu(*model, batch, gpt2::gpt2_spec_to_json(spec), options);
  }
};

class ExecutorTest
    : public ::testing::TestWithParam<std::tuple<gpt2::Granularity, gpt2::Kernels, gpt2::Loss>> {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// One plain autograd step from the current RNG state, the reference of the tests
// below: `scheduled` runs ops from the same RNG state and zeroed gradients and checks
// that the loss and every gradient are plain training's, bit for bit.
struct PlainReference {
  const model::StagedModel& model;
  const model::Batch& batch;
  measure::CpuMemoryMeter& meter;
  CpuRngState rng;
  StepResult plain;
  std::vector<at::Tensor> grads;
  PlainReference(const model::StagedModel& m, const model::Batch& b, measure::CpuMemoryMeter& mt)
      : model(m), batch(b), meter(mt) {
    zero_grads_in_place(model);
    rng = cpu_rng_state();
    plain = run_plain_step(model, batch, meter);
    grads = gradients(model);
  }
  StepResult scheduled(const std::vector<solver::Op>& ops, const ExecutorOptions& options = {}) {
    set_cpu_rng_state(rng);
    zero_grads_in_place(model);
    StepResult r = run_scheduled_step(model, ops, batch, meter, options);
    EXPECT_EQ(r.loss, plain.loss);
    EXPECT_EQ(compare_gradients(gradients(model), grads).max_abs_diff, 0.0);
    return r;
  }
};

// `kind`'s plan for `chain` at `budget_bytes` (500 slots, one thread), or nullopt when
// no plan of it fits.
std::optional<solver::Schedule> plan_at(const solver::Chain& chain, int64_t budget_bytes, SolverKind kind) {
  try {
    return solver::solve(chain, {budget_bytes, kind, 500, 1, /*find_min_budget=*/false});
  } catch (const solver::InfeasibleBudget&) {
    return std::nullopt;
  }
}

// Note [Scheduled equals plain, bit for bit]
// On one thread every kernel is deterministic, a recomputed forward sees the same
// input and (Note [Recompute RNG]) the same dropout mask, and each stage's backward
// runs the same autograd nodes in the same order as the whole-graph backward. So
// the tolerance on gradients and loss is zero: any difference is a bug.
TEST_P(ExecutorTest, EverySolverAtEveryBudgetMatchesPlainTrainingAndItsPrediction) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  PlainReference reference(model, tiny.batch, meter);

  const solver::Chain& chain = tiny.profile.chain;
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  const int64_t minimum = solver::min_feasible_budget(chain, {0, SolverKind::Optimal});
  ASSERT_GT(minimum, 0);
  int num_runs = 0;
  for (const auto& kind : solver::kSolverKinds) {
    if (kind.kind == SolverKind::RotorCompat || kind.kind == SolverKind::OffloadAll) continue;  // over budget / needs a copy engine
    if (!solver::solver_needs(kind.kind, chain).empty()) continue;  // roles the block profile has not
    for (const double fraction : {1.0, 0.7, 0.5, 0.35, 0.0}) {
      const int64_t budget = fraction > 0 ? static_cast<int64_t>(fraction * static_cast<double>(store_all)) : minimum;
      const std::optional<solver::Schedule> found = plan_at(chain, budget, kind.kind);
      if (!found) continue;
      const solver::Schedule& schedule = *found;
      SCOPED_TRACE(std::string(kind.word) + " at " + std::to_string(budget) + " B");
      const StepResult r = reference.scheduled(schedule.ops);
      EXPECT_LE(r.activation_peak_bytes, schedule.budget_bytes);
      // The profile measures what the executor allocates (Note [Stage byte accounting])
      // and the step owns a_0 (Note [The step owns a_0]): the prediction is exact.
      EXPECT_EQ(r.activation_peak_bytes, schedule.predicted.peak_bytes);
      ++num_runs;
    }
  }
  EXPECT_GE(num_runs, 15);
}

// The profile's bytes with seeded stage times: forwards in [1/3, 3] ms, backwards
// twice that, no-grad forwards no slower than the forward.
solver::Chain with_seeded_times(solver::Chain chain, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> log_factor(-std::log(3.0), std::log(3.0));
  const auto factor = [&] { return std::exp(log_factor(rng)); };
  for (solver::Stage& st : chain.stages) {
    st.fwd_ms = factor();
    st.bwd_ms = 2 * factor();
    st.fwd_nograd_ms = st.fwd_ms * std::min(1.0, factor());
  }
  return chain;
}

// with_seeded_times and a seeded link of 0.1-10 GB/s each way.
solver::Chain with_seeded_times_and_link(const solver::Chain& chain, std::mt19937_64& rng) {
  solver::Chain seeded = with_seeded_times(chain, rng);
  std::uniform_real_distribution<double> log_rate(std::log(1e8), std::log(1e10));
  seeded.link = solver::Link{std::exp(log_rate(rng)), std::exp(log_rate(rng))};
  return seeded;
}

// Whether `ops` is a plan not met before in `seen` (which then remembers it).
bool first_time(std::set<std::vector<std::pair<int, int>>>& seen, const std::vector<solver::Op>& ops) {
  std::vector<std::pair<int, int>> key;  // (op kind, index) per op
  for (const solver::Op& op : ops) key.emplace_back(static_cast<int>(op.kind), op.index);
  return seen.insert(key).second;
}

// The profile's times decide which plans the solvers pick, and they are noisy: a
// slower machine or a sanitizer build sees other plans than the test above does. So
// the same claims on the plans of many timings: the profile's bytes with seeded stage
// times in [1/3, 3] ms (backwards twice that, no-grad forwards no slower), optimal
// and recompute-only at three budgets, each distinct plan run once; which plans run
// does not depend on this machine's speed.
TEST_P(ExecutorTest, PlansOfManyTimingsMatchPlainTrainingAndTheirPrediction) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  PlainReference reference(model, tiny.batch, meter);
  std::mt19937_64 rng(5);
  std::set<std::vector<std::pair<int, int>>> seen;
  for (int trial = 0; trial < 24; ++trial) {
    const solver::Chain chain = with_seeded_times(tiny.profile.chain, rng);
    const int64_t store_all = solver::store_all_peak_bytes(chain);
    for (const SolverKind kind : {SolverKind::Optimal, SolverKind::RecomputeOnly}) {
      for (const double fraction : {0.7, 0.5, 0.35}) {
        const auto budget = static_cast<int64_t>(fraction * static_cast<double>(store_all));
        const std::optional<solver::Schedule> found = plan_at(chain, budget, kind);
        if (!found) continue;
        const solver::Schedule& schedule = *found;
        if (!first_time(seen, schedule.ops)) continue;
        SCOPED_TRACE("trial " + std::to_string(trial) + ", " + std::string(solver::info(kind).word) + " at " +
                     std::to_string(budget) + " B");
        const StepResult r = reference.scheduled(schedule.ops);
        EXPECT_EQ(r.activation_peak_bytes, schedule.predicted.peak_bytes);
      }
    }
  }
  EXPECT_GE(seen.size(), 6u);
}

// The CPU copy engine for these ops, sized as `memopt run` sizes it, and the options
// that hold each offload's device bytes until the simulator frees them; no engine for
// ops without copies.
struct EngineForOps {
  std::unique_ptr<CopyEngine> engine;
  ExecutorOptions options;
  EngineForOps(const solver::Chain& chain, const std::vector<solver::Op>& ops) {
    if (const auto copies = plan_copies(chain, ops, "test")) {
      engine = make_copy_engine(c10::Device(c10::kCPU), {0, 0, copies->engine.host_pool_bytes});
      options.copy_engine = engine.get();
      options.offload_done_before = copies->offload_done_before;
    }
  }
};

// Offloading through the CPU copy engine: same gradients, and the peak the simulator
// predicts, to the byte, for every solver at every budget. The profile claims a 1 GB/s
// link; the engine copies as fast as memory allows, so every copy ends before the
// simulator says, and the runner holds the device bytes until then (Note [Offloads end
// when the simulator says]). The engine is sized as `memopt run` sizes it.
TEST_P(ExecutorTest, OffloadingSchedulesMatchPlainTrainingThroughTheCopyEngine) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  chain.link = solver::Link{1e9, 1e9};

  PlainReference reference(model, tiny.batch, meter);
  const int64_t store_all = solver::store_all_peak_bytes(chain);
  int num_offloading = 0, num_saved_moves = 0, num_input_moves = 0, num_runs = 0;
  for (const auto& kind : solver::kSolverKinds) {
    if (kind.kind == SolverKind::RotorCompat) continue;  // may exceed its budget by design
    if (!solver::solver_needs(kind.kind, chain).empty()) continue;  // roles the block profile has not
    for (const double fraction : {1.0, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3}) {
      const int64_t budget = static_cast<int64_t>(fraction * static_cast<double>(store_all));
      const std::optional<solver::Schedule> found = plan_at(chain, budget, kind.kind);
      if (!found) continue;
      const solver::Schedule& schedule = *found;
      SCOPED_TRACE(std::string(kind.word) + " at " + std::to_string(budget) + " B");
      const EngineForOps copies(chain, schedule.ops);
      const StepResult r = reference.scheduled(schedule.ops, copies.options);
      EXPECT_LE(r.activation_peak_bytes, schedule.budget_bytes);
      EXPECT_EQ(r.activation_peak_bytes, schedule.predicted.peak_bytes);
      EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
      num_offloading += r.copies.num_offloads > 0;
      for (const solver::Op& op : schedule.ops) {
        num_saved_moves += op.kind == solver::OpKind::OffloadSaved;
        num_input_moves += op.kind == solver::OpKind::OffloadInput;
      }
      ++num_runs;
    }
  }
  std::printf("%d plans, %d offload, %d saved-state moves, %d kept-input moves\n", num_runs, num_offloading,
              num_saved_moves, num_input_moves);
  EXPECT_GE(num_runs, 15);
  // At operator granularity almost every activation shares the residual with its
  // neighbours and cannot move, and whether saved state is worth moving depends on
  // this machine's stage times: the next test moves it by hand at every granularity.
  if (std::get<0>(GetParam()) != gpt2::Granularity::Op) {
    EXPECT_GE(num_offloading, 2);
    EXPECT_GE(num_saved_moves, 2);  // Note [Offloading saved state] was exercised
  }
}

// The offload DP's plans on many timings, over a link: with_seeded_times and a
// seeded link of 0.1-10 GB/s, `optimal` at four budgets, each distinct plan run once
// through the copy engine. The plans do not depend on this machine's speed, so below
// block granularity they are sure to hold kept items that move their input (Note [A
// kept item that moves its input] in solver/dp/offload.h) next to recomputed segments
// and other copies: gradients bit for bit, peaks the prediction.
TEST_P(ExecutorTest, OffloadingPlansOfManyTimingsMatchPlainTrainingAndTheirPrediction) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  PlainReference reference(model, tiny.batch, meter);
  std::mt19937_64 rng(7);
  std::set<std::vector<std::pair<int, int>>> seen;
  int num_input_moves = 0, num_with_recomputation = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const solver::Chain chain = with_seeded_times_and_link(tiny.profile.chain, rng);
    const int64_t store_all = solver::store_all_peak_bytes(chain);
    for (const double fraction : {0.7, 0.5, 0.4, 0.3}) {
      const auto budget = static_cast<int64_t>(fraction * static_cast<double>(store_all));
      const std::optional<solver::Schedule> found = plan_at(chain, budget, SolverKind::Optimal);
      if (!found) continue;
      const solver::Schedule& schedule = *found;
      if (!first_time(seen, schedule.ops)) continue;
      SCOPED_TRACE("trial " + std::to_string(trial) + " at " + std::to_string(budget) + " B");
      const EngineForOps copies(chain, schedule.ops);
      const StepResult r = reference.scheduled(schedule.ops, copies.options);
      EXPECT_EQ(r.activation_peak_bytes, schedule.predicted.peak_bytes);
      EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
      const bool moves = solver::has_kept_input_move(schedule.ops);
      num_input_moves += moves;
      num_with_recomputation +=
          moves && std::any_of(schedule.ops.begin(), schedule.ops.end(),
                               [](const solver::Op& op) { return op.kind == solver::OpKind::FwdCkpt; });
    }
  }
  std::printf("%zu plans, %d move a kept input, %d of them recompute too\n", seen.size(), num_input_moves,
              num_with_recomputation);
  EXPECT_GE(seen.size(), 5u);
  // A block's input is a small part of what it saves: there these plans seldom move it.
  if (std::get<0>(GetParam()) != gpt2::Granularity::Block) {
    EXPECT_GE(num_input_moves, 3);
    EXPECT_GE(num_with_recomputation, 1);
  }
}

// Note [Plans made for the blocks] (solver/chain/coarsen.h): `optimal` on the chain of the
// blocks, written out on the half-block or operator stages, on seeded timings and
// links. A block's saved-state move becomes a queue of copies, one or two per stage,
// issued back to back and brought back in reverse: gradients bit for bit, peaks the
// prediction on the stages.
TEST_P(ExecutorTest, BlockPlansWrittenOutOnTheStagesMatchPlainTrainingAndTheirPrediction) {
  TinyGpt2 tiny(GetParam());
  if (!solver::coarsen_to_blocks(tiny.profile.chain)) GTEST_SKIP() << "block stages: nothing to write out";
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  PlainReference reference(model, tiny.batch, meter);
  std::mt19937_64 rng(11);
  std::set<std::vector<std::pair<int, int>>> seen;
  int num_queued = 0, num_carrying = 0;
  const bool chain_carries = tiny.profile.chain.carries();
  for (int trial = 0; trial < 6; ++trial) {
    const solver::Chain chain = with_seeded_times_and_link(tiny.profile.chain, rng);
    const solver::Coarsening blocks = *solver::coarsen_to_blocks(chain);
    const int64_t store_all = solver::store_all_peak_bytes(chain);
    for (const double fraction : {0.6, 0.4}) {
      const auto budget = static_cast<int64_t>(fraction * static_cast<double>(store_all));
      const std::optional<solver::Schedule> found = plan_at(blocks.chain, budget, SolverKind::Optimal);
      if (!found) continue;
      const solver::Schedule& block_plan = *found;
      const std::vector<solver::Op> ops = solver::write_out(chain, blocks, block_plan.ops);
      const solver::SimResult predicted = solver::simulate_timeline(chain, ops);
      ASSERT_TRUE(predicted.valid) << predicted.error;
      if (!first_time(seen, ops)) continue;
      SCOPED_TRACE("trial " + std::to_string(trial) + " at " + std::to_string(budget) + " B");
      const EngineForOps copies(chain, ops);
      const StepResult r = reference.scheduled(ops, copies.options);
      EXPECT_EQ(r.activation_peak_bytes, predicted.peak_bytes);
      EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
      num_carrying += std::any_of(ops.begin(), ops.end(), [](const solver::Op& op) { return op.kind == solver::OpKind::OffloadCarried; });
      // A queue: two copies out in a row, with no compute op between them.
      for (size_t p = 1; p < ops.size(); ++p)
        if (solver::is_offload(ops[p].kind) && solver::is_offload(ops[p - 1].kind)) {
          ++num_queued;
          break;
        }
    }
  }
  std::printf("%zu written-out plans, %d with queued copies, %d moving an ending carry\n", seen.size(), num_queued,
              num_carrying);
  EXPECT_GE(seen.size(), 4u);
  EXPECT_GE(num_queued, 2);
  if (chain_carries) {
    EXPECT_GE(num_carrying, 1);
  }
}

// Every stage kept, and each saved state moved to the host right after its forward
// and brought back just before its backward -- written by hand, so that saved-state
// moves run at every granularity whatever the solvers choose on this machine's
// timings: gradients bit for bit, the peak the simulator predicts to the byte.
TEST_P(ExecutorTest, MovingEverySavedStateMatchesPlainTraining) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  chain.link = solver::Link{1e9, 1e9};
  std::vector<bool> moved;
  const std::vector<solver::Op> ops = keep_and_move_every_saved_state(chain, moved);
  const solver::SimResult predicted = solver::simulate_timeline(chain, ops);
  ASSERT_TRUE(predicted.valid) << predicted.error;

  PlainReference reference(model, tiny.batch, meter);
  const EngineForOps copies(chain, ops);
  ASSERT_NE(copies.options.copy_engine, nullptr);
  const StepResult r = reference.scheduled(ops, copies.options);
  EXPECT_EQ(r.activation_peak_bytes, predicted.peak_bytes);
  const int num_moved = static_cast<int>(std::count(moved.begin(), moved.end(), true));
  EXPECT_GE(num_moved, 4);  // not vacuous: stages that save beyond their output
  EXPECT_EQ(r.copies.num_offloads, num_moved);
  EXPECT_EQ(r.copies.num_prefetches, num_moved);
}

// Note [Waiting for the offloads] (solver/chain/simulate.h): the offload-all plan with a
// wait_offloads after every offload -- and the same with saved states moved, so that
// both kinds of copy are waited for: gradients bit for bit, the peak the simulator
// predicts to the byte, which the waits lower.
TEST_P(ExecutorTest, WaitingForEveryOffloadMatchesPlainTrainingAndItsPrediction) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  // A slow link, so that the copies outlast the ops after them and the waits matter.
  chain.link = solver::Link{1e5, 1e5};
  PlainReference reference(model, tiny.batch, meter);
  std::vector<bool> moved;
  const std::vector<solver::Op> moving_saved = keep_and_move_every_saved_state(chain, moved);
  int num_lower = 0;
  for (const std::vector<solver::Op>& plain_ops : {solver::offload_all_ops(chain), moving_saved}) {
    const std::vector<solver::Op> ops = with_waits(plain_ops);
    const solver::SimResult predicted = solver::simulate_timeline(chain, ops);
    ASSERT_TRUE(predicted.valid) << predicted.error;
    num_lower += predicted.peak_bytes < solver::simulate_timeline(chain, plain_ops).peak_bytes;
    const EngineForOps copies(chain, ops);
    ASSERT_NE(copies.options.copy_engine, nullptr);
    const StepResult r = reference.scheduled(ops, copies.options);
    EXPECT_EQ(r.activation_peak_bytes, predicted.peak_bytes);
    EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
    EXPECT_GT(r.copies.num_offloads, 0);
  }
  EXPECT_GE(num_lower, 1);  // not vacuous: waiting changes what the device holds
}

// Note [A kept stage's input may leave] (solver/chain/simulate.h): every stage kept; right
// after each forward its input's own bytes and its saved state beyond its output go to
// the host, the compute stream waits for them, and both come back just before the
// backward. The bytes move from under the leaves, the saved tensors of both graphs and
// the previous stage's output (Note [Moving bytes from under their holders]), so the
// gradients are plain training's bit for bit only if every byte comes back where it
// was, and the measured peak equals the prediction only if the device really gave
// them up: the prediction is below the same plan without the input moves.
TEST_P(ExecutorTest, MovingEveryKeptInputMatchesPlainTrainingAndItsPrediction) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  chain.link = solver::Link{1e9, 1e9};
  const int L = chain.length();
  std::vector<bool> moved;
  const std::vector<solver::Op> ops = with_waits(keep_and_move_every_saved_state(chain, moved, /*inputs=*/true));
  const solver::SimResult predicted = solver::simulate_timeline(chain, ops);
  ASSERT_TRUE(predicted.valid) << predicted.error;
  EXPECT_LT(predicted.peak_bytes,
            solver::simulate_timeline(chain, with_waits(keep_and_move_every_saved_state(chain, moved))).peak_bytes);
  const auto num_inputs = std::count_if(ops.begin(), ops.end(), [](const solver::Op& op) {
    return op.kind == solver::OpKind::OffloadInput;
  });
  EXPECT_GE(num_inputs, L / 2);

  PlainReference reference(model, tiny.batch, meter);
  const EngineForOps copies(chain, ops);
  ASSERT_NE(copies.options.copy_engine, nullptr);
  const StepResult r = reference.scheduled(ops, copies.options);
  EXPECT_EQ(r.activation_peak_bytes, predicted.peak_bytes);
  EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
  // Twice, so that a step that left a storage empty or a copy unreleased shows.
  const StepResult again = reference.scheduled(ops, copies.options);
  EXPECT_EQ(again.activation_peak_bytes, predicted.peak_bytes);
}

// Note [Carried bytes may leave] (solver/chain/simulate.h): the plan above, and each input's
// ending carry too -- the residual stream beside a sublayer, q, k and v beside the
// attention's first half -- moved from under every stage that holds it. Gradients bit
// for bit, the measured peak the prediction to the byte, and that prediction below
// the plan that moves only own bytes and saved states.
TEST_P(ExecutorTest, MovingEveryEndingCarryTooMatchesPlainTrainingAndItsPrediction) {
  TinyGpt2 tiny(GetParam());
  if (!tiny.profile.chain.carries()) GTEST_SKIP() << "block stages carry nothing";
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  chain.link = solver::Link{1e9, 1e9};
  std::vector<bool> moved;
  const std::vector<solver::Op> ops =
      with_waits(keep_and_move_every_saved_state(chain, moved, /*inputs=*/true, /*carries=*/true));
  const solver::SimResult predicted = solver::simulate_timeline(chain, ops);
  ASSERT_TRUE(predicted.valid) << predicted.error;
  EXPECT_LT(predicted.peak_bytes,
            solver::simulate_timeline(chain, with_waits(keep_and_move_every_saved_state(chain, moved, true))).peak_bytes);
  const auto num_carries = std::count_if(ops.begin(), ops.end(), [](const solver::Op& op) {
    return op.kind == solver::OpKind::OffloadCarried;
  });
  EXPECT_GE(num_carries, 2);

  PlainReference reference(model, tiny.batch, meter);
  const EngineForOps copies(chain, ops);
  const StepResult r = reference.scheduled(ops, copies.options);
  EXPECT_EQ(r.activation_peak_bytes, predicted.peak_bytes);
  EXPECT_EQ(r.copies.num_offloads, r.copies.num_prefetches);
  const StepResult again = reference.scheduled(ops, copies.options);
  EXPECT_EQ(again.activation_peak_bytes, predicted.peak_bytes);
}

// Note [Capturing saved tensors from C++]: what the hooks capture and would move is
// exactly what the profiler counts as a stage's saved state beyond its output,
// x̄_{i+1} - x_{i+1}, for every stage of every granularity.
TEST_P(ExecutorTest, CapturedSavedStateIsWhatTheProfileCounts) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  install_saved_state_engine();
  std::vector<at::Tensor> fixed = model.parameters();
  for (const at::Tensor& b : model.module().buffers(true)) fixed.push_back(b);
  const auto statics = static_storages_of(fixed);
  model::Activation input{tiny.batch.input};
  for (int i = 0; i < model.num_stages(); ++i) {
    const model::Activation leaves = model::detached_leaves(input);
    SavedState state(statics, c10::Device(c10::kCPU));
    model::Activation out;
    {
      CaptureScope capture(state);
      out = model.forward_stage(i, leaves, tiny.batch);
    }
    for (const at::Tensor& t : leaves) state.keep_on_device(t);
    for (const at::Tensor& t : out) state.keep_on_device(t);
    state.keep_on_device(tiny.batch.input);
    state.keep_on_device(tiny.batch.targets);
    const solver::Stage& st = tiny.profile.chain.stages[i];
    EXPECT_EQ(state.movable_bytes(), st.saved_bytes - st.out_bytes) << "stage " << i << " (" << st.name << ")";
    input = model::detached_leaves(out, /*with_grad=*/false);
  }
}

// Note [Recompute under the forward's autocast]: the forward runs under CPU autocast
// to bfloat16 and the backward, which recomputes every checkpointed stage, outside
// it, as users write `with torch.autocast(...): loss = model(x)` then backward().
// The scheduled step equals plain training under the same split bit for bit; with
// the restoration off, the recomputations run in float32 and the gradients differ.
// Dropout is off (evaluation mode), so that only autocast tells the two apart.
TEST(ExecutorAutocast, RecomputationsRunUnderTheFirstForwardsAutocast) {
  at::set_num_threads(1);
  TinyGpt2 tiny({gpt2::Granularity::Block, gpt2::Kernels::Aten, gpt2::Loss::Aten});
  model::StagedModel& model = *tiny.model;
  model.train(false);
  const std::vector<solver::Op> ops = solver::recompute_blocks_ops(tiny.profile.chain);
  const auto step = [&](bool scheduled, bool restore) {
    zero_grads_in_place(model);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    if (scheduled) {
      ExecutorOptions options;
      options.restore_rng = restore;
      ScheduleRunner runner(model, ops, options);
      runner.run_forward(model::Batch{tiny.batch.input.clone(), tiny.batch.targets});
      at::autocast::set_autocast_enabled(at::kCPU, false);
      runner.run_backward();
    } else {
      const at::Tensor loss = model.forward(tiny.batch);
      at::autocast::set_autocast_enabled(at::kCPU, false);
      torch::autograd::backward({loss}, {at::ones_like(loss)});
    }
    at::autocast::clear_cache();
    return gradients(model);
  };
  const std::vector<at::Tensor> plain = step(false, true);
  EXPECT_EQ(compare_gradients(step(true, true), plain).max_abs_diff, 0.0);
  EXPECT_GT(compare_gradients(step(true, false), plain).max_abs_diff, 0.0);
  model.train(true);
}

// Note [Host scalars stay]: a graph computing on one device that saved tensors on
// another (sdpa's CPU seed and offset on a GPU) moves only what is on its compute
// device. Here the whole graph is on the CPU: for a state that computes on the CPU
// everything the hooks captured moves; for one that computes on a GPU, nothing does.
TEST(SavedState, MovesOnlyWhatWasSavedOnTheComputeDevice) {
  install_saved_state_engine();
  const at::Tensor w = at::randn({8, 8}).requires_grad_(true);
  const auto statics = static_storages_of({w});
  const auto capture = [&](SavedState& state) {
    const at::Tensor x = at::randn({4, 8});
    at::Tensor y;
    {
      CaptureScope scope(state);
      y = at::tanh(at::matmul(x, w));  // saves x (matmul) and tanh's output
    }
    state.keep_on_device(y);  // a stage's output stays
    return y;
  };
  SavedState on_cpu(statics, c10::Device(c10::kCPU));
  const at::Tensor y_cpu = capture(on_cpu);
  EXPECT_EQ(on_cpu.movable_bytes(), 4 * 8 * 4);  // x alone: w is static, y stays
  SavedState on_gpu(statics, c10::Device(c10::kCUDA, 0));
  const at::Tensor y_gpu = capture(on_gpu);
  EXPECT_EQ(on_gpu.movable_bytes(), 0);
  EXPECT_EQ(on_gpu.num_movable_storages(), 0);
}

// Note [Tensors with no memory of their own]: a tensor saved inside a capture scope that
// has no storage of its own (here a sparse one; a compiled stage traced inside a step
// saves fake ones, which Python makes) is handed back as it is and never becomes
// movable state; a real tensor saved beside it still moves.
TEST(SavedState, TensorsWithNoMemoryOfTheirOwnAreHeldNotMoved) {
  install_saved_state_engine();
  SavedState state(static_storages_of({}), c10::Device(c10::kCPU));
  const at::Tensor sparse = at::eye(8).to_sparse();
  ASSERT_FALSE(sparse.has_storage());
  const at::Tensor w = at::randn({8, 4}).requires_grad_(true);
  const at::Tensor real = at::randn({4, 4}).requires_grad_(true);
  at::Tensor y, z;
  {
    CaptureScope scope(state);
    y = at::mm(sparse, w);  // saves the sparse operand, for w's gradient
    z = at::tanh(real);     // saves its real output
  }
  EXPECT_EQ(state.num_movable_storages(), 1);
  EXPECT_EQ(state.movable_bytes(), 4 * 4 * 4);  // z alone
  // The backward still runs: the hook hands the sparse operand back.
  const at::Tensor grad = torch::autograd::grad({y.sum()}, {w})[0];
  EXPECT_TRUE(at::equal(grad, at::ones({8, 4})));
}

// The ranges a tracer sees (NVTX + CUPTI attribution on CUDA) are the schedule's ops,
// one per op but the loss, named memopt/<op word>/<stage name or a_k>.
TEST_P(ExecutorTest, TracerRangesAreTheScheduleOps) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  solver::Chain chain = tiny.profile.chain;
  chain.link = solver::Link{1e9, 1e9};
  const solver::Schedule schedule = solver::solve(chain, {1LL << 50, SolverKind::OffloadAll});
  std::vector<int64_t> sizes;
  for (int k = 0; k <= chain.length(); ++k) sizes.push_back(chain.x(k));
  auto engine = make_copy_engine(c10::Device(c10::kCPU), {0, 0, HostArena::bytes_for(sizes)});
  measure::StageTracer tracer;  // the CPU tracer: ranges, no device activity
  ExecutorOptions options;
  options.copy_engine = engine.get();
  options.tracer = &tracer;
  run_scheduled_step(model, schedule.ops, tiny.batch, meter, options);
  const measure::TraceReport report = tracer.collect();

  std::vector<std::string> labels;  // expected, in order of first appearance
  std::map<std::string, int> count;
  for (const solver::Op& op : schedule.ops) {
    if (op.kind == solver::OpKind::Loss) continue;
    const bool copy = op.kind == solver::OpKind::Offload || op.kind == solver::OpKind::Prefetch;
    const std::string label = "memopt/" + std::string(solver::info(op.kind).word) + "/" +
                              (copy ? std::string("a") + std::to_string(op.index) : model.stage(op.index).name);
    if (count[label]++ == 0) labels.push_back(label);
  }
  ASSERT_EQ(report.ranges.size(), labels.size());
  for (size_t k = 0; k < labels.size(); ++k) {
    EXPECT_EQ(report.ranges[k].label, labels[k]);
    EXPECT_EQ(report.ranges[k].num_instances, count[labels[k]]) << labels[k];
  }
  EXPECT_GT(count.size(), static_cast<size_t>(2 * model.num_stages()));  // offloads and prefetches are there too
}

TEST_P(ExecutorTest, TwoScheduledRunsAreBitIdentical) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  const solver::Chain& chain = tiny.profile.chain;
  const int64_t budget = solver::min_feasible_budget(chain, {0, SolverKind::RecomputeOnly});
  const solver::Schedule schedule = solver::solve(chain, {budget, SolverKind::RecomputeOnly});
  const CpuRngState rng = cpu_rng_state();
  zero_grads_in_place(model);
  const StepResult first = run_scheduled_step(model, schedule.ops, tiny.batch, meter);
  const auto first_grads = gradients(model);
  set_cpu_rng_state(rng);
  zero_grads_in_place(model);
  const StepResult second = run_scheduled_step(model, schedule.ops, tiny.batch, meter);
  EXPECT_EQ(first.loss, second.loss);
  EXPECT_EQ(compare_gradients(gradients(model), first_grads).max_abs_diff, 0.0);
}

// Without RNG restoration a recomputed stage draws new dropout masks, so its
// gradients differ from plain training: this is what the restoration prevents.
TEST_P(ExecutorTest, RecomputingWithAStaleRngStateIsDetected) {
  TinyGpt2 tiny(GetParam());
  const model::StagedModel& model = *tiny.model;
  measure::CpuMemoryMeter meter;
  const solver::Chain& chain = tiny.profile.chain;
  const solver::Schedule schedule = solver::solve(chain, {1LL << 50, SolverKind::RecomputeBlocks});
  const CpuRngState rng = cpu_rng_state();
  zero_grads_in_place(model);
  run_plain_step(model, tiny.batch, meter);
  const auto plain_grads = gradients(model);
  set_cpu_rng_state(rng);
  zero_grads_in_place(model);
  run_scheduled_step(model, schedule.ops, tiny.batch, meter, ExecutorOptions{/*restore_rng=*/false});
  EXPECT_GT(compare_gradients(gradients(model), plain_grads).max_abs_diff, 0.0);
}

TEST_P(ExecutorTest, RefusesAScheduleForAnotherChainLength) {
  TinyGpt2 tiny(GetParam());
  solver::Schedule schedule = solver::solve(tiny.profile.chain, {1LL << 50, SolverKind::StoreAll});
  schedule.chain_length += 1;
  try {
    check_schedule_fits_model(schedule, *tiny.model, "s.json");
    FAIL() << "accepted a schedule for another chain";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("s.json"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(schedule.chain_length)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(tiny.model->num_stages())), std::string::npos) << what;
    EXPECT_NE(what.find("memopt solve"), std::string::npos) << what;
  }
}

std::string param_name(const ::testing::TestParamInfo<ExecutorTest::ParamType>& info) {
  return std::string(gpt2::granularity_word(std::get<0>(info.param))) + "_" +
         gpt2::kernels_word(std::get<1>(info.param)) + "_" + gpt2::loss_word(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Granularities, ExecutorTest,
                         ::testing::Combine(::testing::Values(gpt2::Granularity::Block, gpt2::Granularity::Sublayer, gpt2::Granularity::Op),
                                            ::testing::Values(gpt2::Kernels::Memopt, gpt2::Kernels::Aten),
                                            ::testing::Values(gpt2::Loss::Aten)),
                         param_name);
// The chunked loss adds wte's gradients into wte.grad in place, in both the head's
// and the embedding's backward: scheduled steps must still equal plain training.
INSTANTIATE_TEST_SUITE_P(ChunkedLoss, ExecutorTest,
                         ::testing::Combine(::testing::Values(gpt2::Granularity::Block, gpt2::Granularity::Sublayer, gpt2::Granularity::Op),
                                            ::testing::Values(gpt2::Kernels::Aten),
                                            ::testing::Values(gpt2::Loss::Chunked)),
                         param_name);

}  // namespace
}  // namespace memopt::runtime

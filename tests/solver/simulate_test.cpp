// simulate_test.cpp: the simulators of docs/formats.md, "Operations and memory without offload:
// the sequential simulator" and "Offload: the timeline simulator" against hand-computed
// peaks and times, the closed forms of docs/formats.md, "Baselines and the solver front door", and
// each other.
//
// Sizes in the hand-computed cases are small integers and times are dyadic, so every
// expected number is exact and compared with ==.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"
#include "solver/chain/plan_edits.h"
#include "solver/chain/simulate.h"
#include "solver/dp/baselines.h"
#include "solver/dp/offload.h"
#include "solver/dp/offload_pipeline.h"
#include "tests/solver/brute_force.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

Op keep(int i) { return {OpKind::FwdKeep, i}; }
Op ckpt(int i) { return {OpKind::FwdCkpt, i}; }
Op drop(int i) { return {OpKind::FwdDrop, i}; }
Op loss() { return {OpKind::Loss, -1}; }
Op bwd(int i) { return {OpKind::Bwd, i}; }
Op offload(int k) { return {OpKind::Offload, k}; }
Op prefetch(int k) { return {OpKind::Prefetch, k}; }

// Large enough that the op carrying it is the peak, so the peak reads off the resident
// bytes at that op: peak = kProbe + resident after the op's additions.
constexpr int64_t kProbe = 1000;

// Two stages with sizes that make every resident set's total distinct enough to read:
// a_0 = 1, a_1 = 2, ā_1 = 8, a_2 = 16, ā_2 = 64 (d_k has a_k's size).
Chain two_stage_chain() {
  Chain c;
  c.input_bytes = 1;
  c.stages.push_back({"s0", 1.0, 2.0, 2, 8, 0, 0});
  c.stages.push_back({"s1", 4.0, 8.0, 16, 64, 0, 0});
  c.loss = {16.0, 0};
  return c;
}

const std::vector<Op> kStoreAll = {keep(0), keep(1), loss(), bwd(1), bwd(0)};
// Checkpoint a_1, keep stage 1, then recompute stage 0 (checkpoint branch j = 1).
const std::vector<Op> kCkptAtOne = {ckpt(0), keep(1), loss(), bwd(1), keep(0), bwd(0)};
// Checkpoint a_0 only (j = 2), then keep both stages.
const std::vector<Op> kCkptAtTwo = {ckpt(0), drop(1), loss(), keep(0), keep(1), bwd(1), bwd(0)};

void expect_valid(const SimResult& r, int64_t peak_bytes, double time_ms) {
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_TRUE(r.error.empty());
  EXPECT_EQ(r.error_op, -1);
  EXPECT_EQ(r.peak_bytes, peak_bytes);
  EXPECT_EQ(r.time_ms, time_ms);
}

TEST(SimulateSequential, StoreAllByHand) {
  // Resident after each op's additions: 9, 73, 89, 91, 12; ends holding d_0 (1 byte).
  const SimResult r = simulate_sequential(two_stage_chain(), kStoreAll);
  expect_valid(r, 91, 1 + 4 + 16 + 8 + 2);
  EXPECT_EQ(r.peak_op, 3);
  EXPECT_EQ(r.copy_ms, 0);
  EXPECT_EQ(r.stall_ms, 0);
}

TEST(SimulateSequential, CheckpointBranchByHand) {
  // 3, 67, 83, 85 at bwd 1 (which then frees d_2, ā_2 and the plain a_1: 3 left),
  // 11, 12. Stage 0 runs forward twice.
  const SimResult r = simulate_sequential(two_stage_chain(), kCkptAtOne);
  expect_valid(r, 85, 1 + 4 + 16 + 8 + 1 + 2);
  EXPECT_EQ(r.peak_op, 3);
  // 3, 19 (then a_1 dropped: 17), 33 (then the plain a_2 freed: 17), 25, 89, 91, 12.
  const SimResult r2 = simulate_sequential(two_stage_chain(), kCkptAtTwo);
  expect_valid(r2, 91, 1 + 4 + 16 + 1 + 4 + 8 + 2);
  EXPECT_EQ(r2.peak_op, 5);
}

// Note [A stage run back to back] in solver/chain/chain.h: a bwd right after its own
// fwd_keep costs the pair less the forward, every other op its own price, in both
// simulators.
TEST(SimulateSequential, PricesAStageRunBackToBack) {
  Chain c = two_stage_chain();
  for (Stage& s : c.stages) s.fwd_nograd_ms = s.fwd_ms / 2;  // 0.5 and 2
  // Back to back, stage 0 takes 2.75 instead of 3 and stage 1 11 instead of 12; each
  // with its no-grad forward still costs more than keeping it (0.5 + 2.75 >= 3).
  c.stages[0].fwd_bwd_pair_ms = 2.75;
  c.stages[1].fwd_bwd_pair_ms = 11.0;
  // Store-all: the loss runs between fwd_keep 1 and bwd 1.
  EXPECT_EQ(simulate_sequential(c, kStoreAll).time_ms, 1 + 4 + 16 + 8 + 2);
  // j = 1: stage 0 recomputed back to back.
  EXPECT_EQ(simulate_sequential(c, kCkptAtOne).time_ms, 0.5 + 4 + 16 + 8 + 1 + 1.75);
  // j = 2: fwd_keep 0, fwd_keep 1, bwd 1 (back to back), bwd 0 (not).
  EXPECT_EQ(simulate_sequential(c, kCkptAtTwo).time_ms, 0.5 + 2 + 16 + 1 + 4 + 7 + 2);
  for (const auto* ops : {&kStoreAll, &kCkptAtOne, &kCkptAtTwo}) {
    EXPECT_EQ(simulate_timeline(c, *ops).time_ms, simulate_sequential(c, *ops).time_ms);
    EXPECT_EQ(compute_only_ms(c, *ops), simulate_sequential(c, *ops).time_ms);
  }
  // A pair that would make recomputing beat keeping rises to keeping's price: with
  // the pair at 2, bwd 0 back to back costs ub - uf_nograd = 1.5, not 1.
  c.stages[0].fwd_bwd_pair_ms = 2.0;
  EXPECT_EQ(c.ub_after_keep(0), 1.5);
  EXPECT_EQ(simulate_sequential(c, kCkptAtOne).time_ms, 0.5 + 4 + 16 + 8 + 1 + 1.5);
}

struct ProbeCase {
  const char* what;
  const std::vector<Op>* ops;
  int stage;         // which tmp carries the probe: stage index, or 2 (= L) for the loss
  bool forward;      // ftmp (else btmp)
  int64_t resident;  // expected resident bytes at the probed op
  int peak_op;
};

TEST(SimulateSequential, EachOpPeaksAtResidentPlusItsTmp) {
  const ProbeCase cases[] = {
      {"fwd_keep 0 counts ā_1 before its tmp", &kStoreAll, 0, true, 9, 0},
      {"fwd_keep 1 reads ā_1 and adds ā_2", &kStoreAll, 1, true, 73, 1},
      {"loss adds d_2 and keeps ā_2", &kStoreAll, 2, false, 89, 2},
      {"bwd 1 adds d_1 before freeing", &kStoreAll, 1, false, 91, 3},
      {"bwd 1 leaves ā_1 for bwd 0", &kStoreAll, 0, false, 12, 4},
      // Recomputing stage 0 pays its tmp again; bwd 1 freed the plain a_1 (else 13).
      {"a recomputation pays ftmp again", &kCkptAtOne, 0, true, 11, 4},
      {"loss after fwd_keep 1 on a plain a_1", &kCkptAtOne, 2, false, 83, 2},
      // fwd_drop 1 freed a_1 before the loss (else 35); the loss frees the plain a_2
      // only after its peak (else 17).
      {"fwd_drop frees its input, loss frees a plain a_L after", &kCkptAtTwo, 2, false, 33, 2},
      {"bwd 0 after a drop-and-keep recompute", &kCkptAtTwo, 0, false, 12, 6},
  };
  for (const ProbeCase& pc : cases) {
    Chain c = two_stage_chain();
    if (pc.stage == c.length()) c.loss.bwd_tmp_bytes = kProbe;
    else if (pc.forward) c.stages[pc.stage].fwd_tmp_bytes = kProbe;
    else c.stages[pc.stage].bwd_tmp_bytes = kProbe;
    const SimResult r = simulate_sequential(c, *pc.ops);
    ASSERT_TRUE(r.valid) << pc.what << ": " << r.error;
    EXPECT_EQ(r.peak_bytes, kProbe + pc.resident) << pc.what;
    EXPECT_EQ(r.peak_op, pc.peak_op) << pc.what;
  }
}

TEST(SimulateSequential, BudgetIsChecked) {
  const SimResult r = simulate_sequential(two_stage_chain(), kStoreAll);
  EXPECT_TRUE(fits(r, 91));
  EXPECT_FALSE(fits(r, 90));
  SimResult invalid = r;
  invalid.valid = false;
  EXPECT_FALSE(fits(invalid, 1000));
}

struct InvalidCase {
  const char* what;
  std::vector<Op> ops;
  int error_op;  // -2: an end-of-schedule error, no particular op to blame
};

TEST(SimulateSequential, RejectsInvalidSchedules) {
  const InvalidCase cases[] = {
      {"needs a missing input", {keep(1), keep(0), loss(), bwd(1), bwd(0)}, 0},
      {"fwd_drop on ā", {keep(0), drop(1), loss(), keep(1), bwd(1), bwd(0)}, 1},
      {"bwd before loss", {keep(0), keep(1), bwd(1), loss(), bwd(0)}, 2},
      {"bwd without ā (the stage ran fwd_ckpt)", {ckpt(0), ckpt(1), loss(), bwd(1), keep(0), bwd(0)}, 3},
      {"input dropped, then needed", {ckpt(0), drop(1), loss(), keep(1), bwd(1), keep(0), bwd(0)}, 3},
      {"reuses a_0 after bwd 0 freed it", {keep(0), keep(1), loss(), bwd(1), bwd(0), ckpt(0)}, 5},
      {"stage index L is not a stage", {keep(0), keep(1), keep(2), loss(), bwd(1), bwd(0)}, 2},
      {"negative stage index", {keep(-1), keep(0), keep(1), loss(), bwd(1), bwd(0)}, 0},
      {"bwd index out of range", {keep(0), keep(1), loss(), bwd(7), bwd(1), bwd(0)}, 3},
      {"offload in the sequential simulator", {ckpt(0), offload(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)}, 1},
      {"ends holding ā_1, d_1 and a_0", {keep(0), keep(1), loss(), bwd(1)}, -2},
      {"ends holding only a_0 (empty schedule)", {}, -2},
      {"ends without any backward", {keep(0), keep(1), loss()}, -2},
  };
  const Chain c = two_stage_chain();
  for (const InvalidCase& ic : cases) {
    const SimResult r = simulate_sequential(c, ic.ops);
    EXPECT_FALSE(r.valid) << ic.what;
    EXPECT_FALSE(r.error.empty()) << ic.what;
    if (ic.error_op >= 0) {
      EXPECT_EQ(r.error_op, ic.error_op) << ic.what << ": " << r.error;
    }
    // Without offload ops the timeline simulator must reject the same op.
    const bool has_offload = std::any_of(ic.ops.begin(), ic.ops.end(), [](const Op& op) { return !info(op.kind).is_compute; });
    if (has_offload) continue;
    const SimResult t = simulate_timeline(c, ic.ops);
    EXPECT_FALSE(t.valid) << "timeline: " << ic.what;
    if (ic.error_op >= 0) {
      EXPECT_EQ(t.error_op, ic.error_op) << "timeline: " << ic.what;
    }
  }
}

// Hand-built op lists (not the baselines'), so the closed forms check the simulator.
std::vector<Op> store_all_by_hand(int L) {
  std::vector<Op> ops;
  for (int i = 0; i < L; ++i) ops.push_back(keep(i));
  ops.push_back(loss());
  for (int i = L - 1; i >= 0; --i) ops.push_back(bwd(i));
  return ops;
}

std::vector<Op> recompute_blocks_by_hand(int L) {
  std::vector<Op> ops;
  for (int i = 0; i + 1 < L; ++i) ops.push_back(ckpt(i));
  ops.push_back(keep(L - 1));
  ops.push_back(loss());
  ops.push_back(bwd(L - 1));
  for (int i = L - 2; i >= 0; --i) { ops.push_back(keep(i)); ops.push_back(bwd(i)); }
  return ops;
}

TEST(SimulateSequential, ClosedFormsOnHomogeneousChains) {
  // Dyadic times: every sum below is exact in double.
  const double uf = 1.25, ub = 2.5;
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1}, {3, 7}, {1000, 10000}, {4096, 4096 * 11}};
  for (int L = 1; L <= 40; ++L) {
    for (const auto& [c, cbar] : sizes) {
      const Chain chain = testing::homogeneous_chain(L, uf, ub, c, cbar);
      for (const bool timeline : {false, true}) {
        const auto sim = [&](const std::vector<Op>& ops) {
          return timeline ? simulate_timeline(chain, ops) : simulate_sequential(chain, ops);
        };
        const SimResult sa = sim(store_all_by_hand(L));
        ASSERT_TRUE(sa.valid) << sa.error;
        EXPECT_EQ(sa.time_ms, L * (uf + ub)) << "L=" << L;
        EXPECT_EQ(sa.peak_bytes, L * cbar + 3 * c) << "L=" << L;
        const SimResult rb = sim(recompute_blocks_by_hand(L));
        ASSERT_TRUE(rb.valid) << rb.error;
        EXPECT_EQ(rb.time_ms, (2 * L - 1) * uf + L * ub) << "L=" << L;
        EXPECT_EQ(rb.peak_bytes, (L + 2) * c + cbar) << "L=" << L;
      }
    }
  }
}

TEST(SimulateTimeline, EqualsSequentialOnRandomPersistentSchedules) {
  std::mt19937_64 rng(20240601);
  int num_checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    testing::RandomChainOptions o;
    o.length = 1 + trial % 12;
    o.unit_bytes = 1 + static_cast<int64_t>(rng() % 5000);
    o.max_units = 50;
    o.integer_ms = trial % 2 == 0;  // odd trials: arbitrary real times
    o.max_ms = 30;
    o.carry_probability = trial % 3 == 0 ? 0.6 : 0.0;  // Note [Carried bytes]
    o.below_gradient_probability = trial % 4 == 1 ? 0.5 : 0.0;  // Note [A backward may peak below its gradient]
    const Chain chain = testing::random_chain(rng, o);
    ASSERT_EQ(validate(chain), "");
    const std::vector<Op> ops = testing::random_persistent_schedule(o.length, rng);
    const SimResult s = simulate_sequential(chain, ops);
    const SimResult t = simulate_timeline(chain, ops);
    ASSERT_TRUE(s.valid) << s.error;
    ASSERT_TRUE(t.valid) << t.error;
    // Exact: the same additions in the same order, and integer bytes.
    EXPECT_EQ(s.peak_bytes, t.peak_bytes) << "trial " << trial;
    EXPECT_EQ(s.time_ms, t.time_ms) << "trial " << trial;
    EXPECT_EQ(t.stall_ms, 0);
    EXPECT_EQ(t.copy_ms, 0);
    ++num_checked;
  }
  EXPECT_EQ(num_checked, 3000);
}

TEST(SimulateTimeline, AgreesWithSequentialOnMutatedSchedules) {
  // Valid persistent schedules with one op swapped, deleted, duplicated or re-indexed:
  // mostly invalid, and both simulators must say so at the same op.
  std::mt19937_64 rng(77);
  int num_invalid = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    testing::RandomChainOptions o;
    o.length = 1 + trial % 6;
    const Chain chain = testing::random_chain(rng, o);
    std::vector<Op> ops = testing::random_persistent_schedule(o.length, rng);
    const size_t p = rng() % ops.size();
    switch (rng() % 4) {
      case 0: std::swap(ops[p], ops[rng() % ops.size()]); break;
      case 1: ops.erase(ops.begin() + static_cast<long>(p)); break;
      case 2: ops.insert(ops.begin() + static_cast<long>(p), ops[p]); break;
      default:
        if (ops[p].kind != OpKind::Loss) ops[p].index = static_cast<int>(rng() % (o.length + 2)) - 1;
        break;
    }
    const SimResult s = simulate_sequential(chain, ops);
    const SimResult t = simulate_timeline(chain, ops);
    ASSERT_EQ(s.valid, t.valid) << "trial " << trial << ": " << s.error << " | " << t.error;
    if (s.valid) {
      EXPECT_EQ(s.peak_bytes, t.peak_bytes);
      EXPECT_EQ(s.time_ms, t.time_ms);
    } else {
      EXPECT_EQ(s.error_op, t.error_op) << s.error << " | " << t.error;
      ++num_invalid;
    }
  }
  EXPECT_GT(num_invalid, 1000);  // the mutations do exercise the error paths
}

// docs/formats.md, "Offload: the timeline simulator" by hand. Link speeds of 1000 B/s make a copy
// of k bytes take k ms.
Chain offload_chain(double d2h_bytes_per_s, double h2d_bytes_per_s) {
  Chain c;
  c.input_bytes = 10;
  c.stages.push_back({"s0", 5.0, 2.0, 20, 20, 0, 0});
  c.stages.push_back({"s1", 20.0, 10.0, 40, 40, 0, 0});
  c.loss = {1.0, 0};
  c.link = Link{d2h_bytes_per_s, h2d_bytes_per_s};
  return c;
}

void expect_timeline(const SimResult& r, int64_t peak_bytes, double time_ms, double stall_ms, double copy_ms) {
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_EQ(r.peak_bytes, peak_bytes);
  EXPECT_DOUBLE_EQ(r.time_ms, time_ms);
  EXPECT_DOUBLE_EQ(r.stall_ms, stall_ms);
  EXPECT_DOUBLE_EQ(r.copy_ms, copy_ms);
}

// Note [Stopping over the budget] in simulate.cpp: with a bound, a plan whose peak is
// within it gets exactly the result it gets without one, and a plan whose peak is
// above it is either simulated whole or stopped, never with a total above its peak.
// Plans of the offload DP, the pipelined family and offload-all, on chains with and
// without carried bytes, against bounds across each plan's range.
TEST(SimulateTimeline, StopsOnlyPlansSurelyOverTheBound) {
  std::mt19937_64 rng(61);
  int num_within = 0, num_stopped = 0, num_over = 0;
  for (int trial = 0; trial < 200; ++trial) {
    testing::RandomChainOptions o;
    o.length = 2 + trial % 9;
    o.carry_probability = trial % 3 == 0 ? 0.5 : 0.0;
    Chain chain = testing::random_chain(rng, o);
    const double rates[] = {300.0, 3000.0, 30000.0};
    chain.link = Link{rates[trial % 3], rates[(trial / 3) % 3]};
    const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
    std::vector<std::vector<Op>> plans{offload_all_ops(chain)};
    for (const int tenths : {3, 6})
      if (auto plan = solve_offload(chain, std::max<int64_t>(1, store_all * tenths / 10), {200, false, 1})) plans.push_back(*plan);
    const int L = chain.length();
    for (int d = 1; d <= 2; ++d) plans.push_back(pipelined_offload_ops(chain, 0, L, d, {}, trial % 2 == 1));
    for (const std::vector<Op>& ops : plans) {
      const SimResult whole = simulate_timeline(chain, ops);
      if (!whole.valid) continue;
      for (int64_t bound = 0; bound <= whole.peak_bytes + 2; bound += 1 + whole.peak_bytes / 16) {
        SCOPED_TRACE("trial " + std::to_string(trial) + ", bound " + std::to_string(bound));
        const SimResult r = simulate_timeline(chain, ops, bound);
        if (whole.peak_bytes <= bound) {
          ++num_within;
          ASSERT_TRUE(r.valid) << r.error;
          EXPECT_FALSE(r.stopped_over);
          EXPECT_EQ(r.peak_bytes, whole.peak_bytes);
          EXPECT_EQ(r.time_ms, whole.time_ms);
          EXPECT_EQ(r.offload_done_before, whole.offload_done_before);
          continue;
        }
        EXPECT_FALSE(fits(r, bound));
        if (r.stopped_over) {
          ++num_stopped;
          EXPECT_FALSE(r.valid);
          EXPECT_GT(r.peak_bytes, bound);
          EXPECT_LE(r.peak_bytes, whole.peak_bytes);
        } else {
          ++num_over;
          EXPECT_EQ(r.peak_bytes, whole.peak_bytes);
        }
      }
    }
  }
  EXPECT_GT(num_within, 500);
  EXPECT_GT(num_stopped, 500);  // not vacuous: most plans over a bound stop early
  std::printf("within %d, stopped %d, over but simulated whole %d\n", num_within, num_stopped, num_over);
}

// `resumed`: a TimelinePrefix's result, which leaves offload_done_before empty (Note [Op
// times only for whole simulations]).
void expect_same_result(const SimResult& a, const SimResult& b, bool resumed = false) {
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.error_op, b.error_op);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.time_ms, b.time_ms);  // bit for bit
  EXPECT_EQ(a.peak_op, b.peak_op);
  EXPECT_EQ(a.copy_ms, b.copy_ms);
  EXPECT_EQ(a.stall_ms, b.stall_ms);
  if (resumed)
    EXPECT_TRUE(a.offload_done_before.empty());
  else
    EXPECT_EQ(a.offload_done_before, b.offload_done_before);
  EXPECT_EQ(a.stopped_over, b.stopped_over);
  EXPECT_EQ(a.stopped_late, b.stopped_late);
}

// Note [Resuming from a shared prefix] in simulate.cpp: a TimelinePrefix's result is
// simulate_timeline's, field for field and bit for bit, for plans that differ from its
// base anywhere (copies and waits moved, dropped or added, valid or not), under byte
// and time bounds that cut inside the shared prefix and after it, as the base moves
// on to candidates it accepts, forward and back (Note [Going back along the base]: to the
// states it keeps along the way).
TEST(TimelinePrefix, GivesTheWholeSimulationsResultBitForBit) {
  std::mt19937_64 rng(83);
  int num_compared = 0, num_valid = 0, num_stopped = 0, num_rebased = 0;
  int64_t num_rejoined = 0, num_back_to_kept = 0;
  for (int trial = 0; trial < 60; ++trial) {
    testing::RandomChainOptions o;
    o.length = 12 + trial % 30;
    o.integer_ms = trial % 2 == 0;
    o.carry_probability = trial % 3 == 0 ? 0.5 : 0.0;
    Chain chain = testing::random_chain(rng, o);
    const double rates[] = {300.0, 3000.0, 30000.0};
    chain.link = Link{rates[trial % 3], rates[(trial / 3) % 3]};
    const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
    std::vector<Op> base = trial % 4 == 0 ? offload_all_ops(chain) : pipelined_offload_ops(chain, 0, chain.length(), 1 + trial % 3, {}, trial % 2 == 1);
    if (trial % 4 == 1)
      if (auto plan = solve_offload(chain, std::max<int64_t>(1, store_all / 2), {200, false, 1})) base = *plan;
    SimResult base_sim = simulate_timeline(chain, base);
    if (!base_sim.valid) continue;
    const double compute_ms = compute_only_ms(chain, base);
    TimelinePrefix prefix(chain, base, compute_ms);
    TimelinePrefix rejoining(chain, base, compute_ms, /*rejoin=*/true);
    for (int step = 0; step < 150; ++step) {
      // A copy or wait moved, dropped, or a wait added, anywhere.
      std::vector<Op> c;
      const size_t p = rng() % base.size();
      switch (rng() % 3) {
        case 0: {
          if (info(base[p].kind).is_compute) continue;
          c = moved(base, p, rng() % base.size());
          break;
        }
        case 1:
          if (info(base[p].kind).is_compute) continue;
          c = erased(base, p);
          break;
        default: c = inserted(base, p, {OpKind::WaitOffloads, -1}); break;
      }
      const int64_t bytes_bounds[] = {std::numeric_limits<int64_t>::max(), base_sim.peak_bytes,
                                      static_cast<int64_t>(rng() % static_cast<uint64_t>(base_sim.peak_bytes + 1))};
      const double time_bounds[] = {std::numeric_limits<double>::infinity(), base_sim.time_ms,
                                    base_sim.time_ms * (0.5 + 0.6 * static_cast<double>(rng() % 1000) / 1000.0)};
      for (const int64_t above : bytes_bounds)
        for (const double after : time_bounds) {
          SCOPED_TRACE("trial " + std::to_string(trial) + ", step " + std::to_string(step));
          const SimResult whole = simulate_timeline(chain, c, above, after, compute_ms);
          const SimResult resumed = prefix.simulate(c, above, after);
          expect_same_result(resumed, whole, /*resumed=*/true);
          expect_same_result(rejoining.simulate(c, above, after), whole, /*resumed=*/true);
          ++num_compared;
          num_valid += whole.valid;
          num_stopped += whole.stopped_over || whole.stopped_late;
        }
      // Now and then the base becomes a valid candidate, as the polish takes one.
      const SimResult r = simulate_timeline(chain, c);
      if (r.valid && rng() % 4 == 0) {
        base = c;
        base_sim = r;
        prefix.rebase(base);
        rejoining.rebase(base);
        ++num_rebased;
      }
    }
    num_rejoined += rejoining.rejoins();
    num_back_to_kept += prefix.back_to_kept() + rejoining.back_to_kept();
  }
  EXPECT_GT(num_rejoined, 2000);
  EXPECT_GT(num_back_to_kept, 2000);
  EXPECT_GT(num_valid, 2000);  // not vacuous: valid candidates, stopped ones, new bases
  EXPECT_GT(num_stopped, 2000);
  EXPECT_GT(num_rebased, 200);
  std::printf("compared %d, valid %d, stopped %d, rebased %d, rejoined %lld, back to a kept state %lld\n",
              num_compared, num_valid, num_stopped, num_rebased, static_cast<long long>(num_rejoined),
              static_cast<long long>(num_back_to_kept));
}

// Plans to edit on a linked chain: offload-all, store-all and the offload DP's at 40%
// and 70% of store-all's peak.
std::vector<std::vector<Op>> plans_to_edit(const Chain& chain) {
  const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
  std::vector<std::vector<Op>> plans{offload_all_ops(chain), store_all_ops(chain)};
  for (const int percent : {40, 70}) {
    const int64_t budget = std::max<int64_t>(1, store_all * percent / 100);
    if (auto plan = solve_offload(chain, budget, {static_cast<int>(std::min<int64_t>(budget, 300)), false, 1}))
      plans.push_back(std::move(*plan));
  }
  return plans;
}
// check(chain, ops, simulation) for each valid plan of plans_to_edit on 40 linked
// chains of 2 to 10 stages.
template <typename Check>
void for_each_plan_to_edit(uint64_t seed, Check check) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 40; ++trial) {
    const Chain chain = testing::linked_chain(rng, trial, 2 + trial % 9);
    SCOPED_TRACE("trial " + std::to_string(trial));
    for (const std::vector<Op>& ops : plans_to_edit(chain)) {
      const SimResult base = simulate_timeline(chain, ops);
      if (base.valid) check(chain, ops, base);
    }
  }
}

// Note [Round trips only repair] in solver/search/polish.h: a round trip added to a
// valid plan -- its offload anywhere from right after the data is made up to its next
// reader, its prefetch at any place after that before the reader -- never makes the
// plan take less time, on chains with and without carried bytes, over slow and fast
// links, from the DPs' plans and offload-all; nor does a wait_offloads put in with it
// before one of the ops after the offload, as the repairs try (Note [Repairs that end
// after the best one]), or anywhere into the plan alone.
TEST(SimulateTimeline, AddingARoundTripOrAWaitNeverMakesAPlanFaster) {
  int64_t num_valid = 0, num_slower = 0, num_waited = 0, num_waited_slower = 0;
  const auto expect_no_faster = [&](const SimResult& r, const SimResult& than, int64_t& valid, int64_t& slower,
                                    const std::string& what) {
    if (!r.valid) return;
    ++valid;
    slower += r.time_ms > than.time_ms;
    EXPECT_GE(r.time_ms, than.time_ms) << what;
  };
  for_each_plan_to_edit(8191, [&](const Chain& chain, const std::vector<Op>& ops, const SimResult& base) {
    for (size_t w = 0; w <= ops.size(); ++w)
      expect_no_faster(simulate_timeline(chain, inserted(ops, w, {OpKind::WaitOffloads, -1})), base, num_waited,
                       num_waited_slower, "a wait at " + std::to_string(w));
    std::vector<RoundTrip> trips;
    for (int k = 0; k < chain.length(); ++k) {
      if (const auto trip = saved_state_round_trip(chain, ops, k)) trips.push_back(*trip);
      for (const RoundTrip& trip : activation_round_trips(chain, ops, k)) trips.push_back(trip);
    }
    for (const RoundTrip& trip : trips)
      for (size_t off_at = trip.made + 1; off_at <= trip.reader; ++off_at) {
        const std::vector<Op> with_out = inserted(ops, off_at, trip.out);
        for (size_t at = off_at + 1; at <= trip.reader + 1; ++at) {
          const std::vector<Op> with_back = inserted(with_out, at, {way_back(trip.out.kind), trip.out.index});
          const std::string where = "off at " + std::to_string(off_at) + ", back at " + std::to_string(at);
          const SimResult r = simulate_timeline(chain, with_back);
          expect_no_faster(r, base, num_valid, num_slower, where);
          for (size_t w = off_at + 1; w < with_back.size() && w <= off_at + 3; ++w) {
            const SimResult waited = simulate_timeline(chain, inserted(with_back, w, {OpKind::WaitOffloads, -1}));
            expect_no_faster(waited, base, num_valid, num_slower, where + ", a wait at " + std::to_string(w));
            if (r.valid) expect_no_faster(waited, r, num_waited, num_waited_slower, where + ", a wait at " + std::to_string(w));
          }
        }
      }
  });
  // Not vacuous: many cost time.
  EXPECT_GT(num_valid, 2000);
  EXPECT_GT(num_slower, 200);
  EXPECT_GT(num_waited, 2000);
  EXPECT_GT(num_waited_slower, 200);
}

// Note [Round trips after the peak] in solver/search/polish.h: a round trip whose
// offload comes after the op at whose start the plan first reaches its peak -- its
// prefetch anywhere after it, a wait_offloads or none after the offload -- never
// lowers the peak; one whose offload comes before that op often does.
TEST(SimulateTimeline, ARoundTripAfterThePeakNeverLowersIt) {
  int64_t num_after = 0, num_before_lower = 0;
  for_each_plan_to_edit(131071, [&](const Chain& chain, const std::vector<Op>& ops, const SimResult& base) {
    ASSERT_GE(base.peak_op, 0);
    const auto peak_op = static_cast<size_t>(base.peak_op);
    std::vector<RoundTrip> trips;
    for (int k = 0; k < chain.length(); ++k) {
      if (const auto trip = saved_state_round_trip(chain, ops, k)) trips.push_back(*trip);
      for (const RoundTrip& trip : activation_round_trips(chain, ops, k)) trips.push_back(trip);
    }
    for (const RoundTrip& trip : trips) {
      const Op back{way_back(trip.out.kind), trip.out.index};
      const size_t off_at = trip.made + 1;
      const std::vector<Op> with_out = inserted(ops, off_at, trip.out);
      for (size_t at = off_at + 1; at <= trip.reader + 1; ++at) {
        const std::vector<Op> with_back = inserted(with_out, at, back);
        std::vector<std::vector<Op>> plans = {with_back};
        for (size_t w = off_at + 1; w < with_back.size() && w <= off_at + 3; ++w)
          plans.push_back(inserted(with_back, w, {OpKind::WaitOffloads, -1}));
        for (const std::vector<Op>& plan : plans) {
          const SimResult r = simulate_timeline(chain, plan);
          if (!r.valid) continue;
          if (off_at > peak_op) {
            ++num_after;
            EXPECT_GE(r.peak_bytes, base.peak_bytes) << "off at " << off_at << ", back at " << at;
          } else {
            num_before_lower += r.peak_bytes < base.peak_bytes;
          }
        }
      }
    }
  });
  EXPECT_GT(num_after, 500);
  EXPECT_GT(num_before_lower, 100);  // not vacuous: before the peak, round trips lower it
}

// Note [A wait that waits for nothing] in solver/search/polish.h: a wait_offloads put
// right before a compute op by whose start every earlier copy to the host has ended
// (SimResult::offload_done_before) leaves the plan's time and peak exactly as they
// were; before one that some copy is still running at, it often costs time.
TEST(SimulateTimeline, AWaitAfterEveryCopyHasEndedChangesNothing) {
  int num_idle = 0, num_in_flight_slower = 0;
  for_each_plan_to_edit(524287, [&](const Chain& chain, const std::vector<Op>& ops, const SimResult& base) {
    int copies_end_by = -1;
    for (size_t p = 0; p < ops.size(); ++p) {
      const bool in_flight = copies_end_by > static_cast<int>(p);
      if (is_offload(ops[p].kind)) {
        const int done = base.offload_done_before[p];
        copies_end_by = std::max(copies_end_by, done < 0 ? std::numeric_limits<int>::max() : done);
      }
      if (!info(ops[p].kind).is_compute) continue;
      const SimResult r = simulate_timeline(chain, inserted(ops, p, {OpKind::WaitOffloads, -1}));
      EXPECT_TRUE(r.valid) << r.error;
      if (in_flight) {
        num_in_flight_slower += r.time_ms > base.time_ms;
        continue;
      }
      ++num_idle;
      EXPECT_EQ(r.time_ms, base.time_ms) << "a wait before op " << p;
      EXPECT_EQ(r.peak_bytes, base.peak_bytes) << "a wait before op " << p;
    }
  });
  EXPECT_GT(num_idle, 500);
  EXPECT_GT(num_in_flight_slower, 50);  // not vacuous: where a copy runs, waiting costs
}

// Note [What the simulator refuses] in solver/chain/simulate.h: a wait_offloads put
// anywhere into a plan the simulator refuses leaves it refused at the same op (one
// place on where the wait comes before it), and into one it accepts leaves it
// accepted; and a round trip refused at its offload is refused there at every
// prefetch position. The plans are the polish's round trips (Note [Refused round
// trips] in solver/search/polish.h), their prefetch also placed up to two ops past
// the data's reader, which then reads it from the host: many are refused, at the
// offload and after it.
TEST(SimulateTimeline, AWaitNeverChangesWhatIsRefused) {
  int64_t num_refused = 0, num_refused_later = 0, num_accepted = 0;
  for_each_plan_to_edit(2147483647, [&](const Chain& chain, const std::vector<Op>& ops, const SimResult&) {
    std::vector<RoundTrip> trips;
    for (int k = 0; k < chain.length(); ++k) {
      if (const auto trip = saved_state_round_trip(chain, ops, k)) trips.push_back(*trip);
      for (const RoundTrip& trip : activation_round_trips(chain, ops, k)) trips.push_back(trip);
    }
    for (const RoundTrip& trip : trips) {
      const size_t off_at = trip.made + 1;
      const std::vector<Op> with_out = inserted(ops, off_at, trip.out);
      std::optional<bool> offload_refused;
      for (size_t at = off_at + 1; at <= std::min(trip.reader + 3, with_out.size()); ++at) {
        const std::vector<Op> with_back = inserted(with_out, at, {way_back(trip.out.kind), trip.out.index});
        const SimResult r = simulate_timeline(chain, with_back);
        ASSERT_TRUE(r.valid || refused(r));
        const bool at_offload = refused(r) && r.error_op == static_cast<int>(off_at);
        if (!offload_refused) offload_refused = at_offload;
        EXPECT_EQ(at_offload, *offload_refused) << "the offload at " << off_at << ", back at " << at;
        if (r.valid) ++num_accepted;
        else if (at_offload) ++num_refused;
        else ++num_refused_later;
        for (size_t w = 0; w <= with_back.size(); ++w) {
          const SimResult waited = simulate_timeline(chain, inserted(with_back, w, {OpKind::WaitOffloads, -1}));
          ASSERT_EQ(waited.valid, r.valid) << "a wait at " << w << ": " << waited.error;
          if (r.valid) continue;
          EXPECT_TRUE(refused(waited));
          EXPECT_EQ(waited.error_op, r.error_op + (w <= static_cast<size_t>(r.error_op) ? 1 : 0)) << "a wait at " << w;
        }
      }
    }
  });
  // Not vacuous: each kind is common.
  EXPECT_GT(num_refused, 200);
  EXPECT_GT(num_refused_later, 200);
  EXPECT_GT(num_accepted, 1500);
}

TEST(SimulateTimeline, OffloadFreesTheDeviceCopyWhenTheCopyEnds) {
  const std::vector<Op> ops = {ckpt(0), offload(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)};
  // Without the offload: a_0 stays, peak 130 at bwd 1 (10+20+40+40+20), time 43.
  const std::vector<Op> no_offload = {ckpt(0), keep(1), loss(), bwd(1), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(offload_chain(1000, 1000), no_offload), 130, 43, 0, 0);
  // Fast link: the copy of a_0 runs 5..15 (issued when fwd_ckpt 0 ends, never
  // blocking fwd_keep 1), so bwd 1 at t=26 sees 20+40+40+20 = 120. The prefetch is
  // issued when bwd 1 ends (36) and lands at 46: fwd_keep 0 stalls 10 ms, 46..51,
  // bwd 0 51..53.
  expect_timeline(simulate_timeline(offload_chain(1000, 1000), ops), 120, 53, 10, 20);
  // Slow d2h (100 ms for a_0): the device copy lives until 105, so bwd 1 still sees
  // 130; the prefetch waits for the offload to end (105..115): stall 115-36 = 79.
  // At t=36 bwd 1's frees precede the prefetch's allocation (it is issued after).
  expect_timeline(simulate_timeline(offload_chain(100, 1000), ops), 130, 122, 79, 110);
}

// Note [Waiting for the offloads]: the compute stream waits for the last offload to
// end, so the ops after it no longer count its bytes.
TEST(SimulateTimeline, WaitOffloadsHoldsTheComputeStreamUntilTheOffloadsEnd) {
  const Op wait{OpKind::WaitOffloads, -1};
  const std::vector<Op> ops = {ckpt(0), offload(0), wait, keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)};
  // Slow d2h (100 ms for a_0, 5..105): fwd_keep 1 starts at 105 rather than 5, and
  // bwd 1 (126..136) sees 120 rather than the 130 of the same plan without the wait
  // (the test above). The prefetch, issued at 136, lands at 146: fwd_keep 0 146..151,
  // bwd 0 151..153. Stall: 100 waiting + 10 for the prefetch.
  const SimResult r = simulate_timeline(offload_chain(100, 1000), ops);
  expect_timeline(r, 120, 153, 110, 110);
  EXPECT_EQ(r.offload_done_before[1], 3);  // the runtime lets a_0 go before fwd_keep 1
  // With nothing in flight it changes nothing: the fast copy ended at 15, before the
  // wait after fwd_keep 1 (t = 25).
  const std::vector<Op> late = {ckpt(0), offload(0), keep(1), wait, loss(), bwd(1), prefetch(0), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(offload_chain(1000, 1000), late), 120, 53, 10, 20);
  // It waits for the offloads issued before it, not for those after it.
  const std::vector<Op> before = {ckpt(0), wait, offload(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(offload_chain(100, 1000), before), 130, 122, 79, 110);
  // Only the timeline simulator knows it.
  const SimResult seq = simulate_sequential(offload_chain(100, 1000), {ckpt(0), wait, keep(1), loss(), bwd(1), keep(0), bwd(0)});
  EXPECT_FALSE(seq.valid);
  EXPECT_EQ(seq.error_op, 1);
  EXPECT_NE(seq.error.find("timeline simulator"), std::string::npos) << seq.error;
}

// Note [A kept stage keeps its input]: between fwd_keep 0 and bwd 0 the stage's
// saved state may hold a_0, so offloading it is refused, naming the alternatives.
TEST(SimulateTimeline, AKeptStagesInputStaysUntilItsBackward) {
  const std::vector<Op> ops = {keep(0), offload(0), keep(1), loss(), bwd(1), prefetch(0), bwd(0)};
  const SimResult r = simulate_timeline(offload_chain(1000, 1000), ops);
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.error_op, 1);
  EXPECT_NE(r.error.find("whose saved state ā_1 is on the device"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("offload_input 0"), std::string::npos) << r.error;
  // The same copy before fwd_keep 0 (a_0 checkpointed and recomputed) is fine.
  EXPECT_TRUE(simulate_timeline(offload_chain(1000, 1000),
                                {ckpt(0), offload(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)})
                  .valid);
}

TEST(SimulateTimeline, PrefetchAllocatesAtIssue) {
  // The prefetch is issued right after the loss (t=26), before bwd 1: its 10 bytes
  // count while bwd 1 runs (26..36) although they land only at 36: 20+40+40+10+20 =
  // 130 (120 if the allocation waited for the copy). fwd_keep 0 starts at 36: no stall.
  const std::vector<Op> ops = {ckpt(0), offload(0), keep(1), loss(), prefetch(0), bwd(1), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(offload_chain(1000, 1000), ops), 130, 43, 0, 20);
  // With a slow h2d link (20 ms) fwd_keep 0 waits until 46: stall 10, time 53.
  expect_timeline(simulate_timeline(offload_chain(1000, 500), ops), 130, 53, 10, 30);
}

// Three stages of 10-byte tensors, unit times, 1000 B/s links (a copy of a_k takes 10 ms
// for k >= 1 and input_bytes ms for a_0).
Chain three_stage_link_chain(int64_t input_bytes) {
  Chain c;
  c.input_bytes = input_bytes;
  for (int i = 0; i < 3; ++i) c.stages.push_back({testing::numbered("s", i), 1.0, 1.0, 10, 10, 0, 0});
  c.loss = {1.0, 0};
  c.link = Link{1000, 1000};
  return c;
}

TEST(SimulateTimeline, EachLinkServesItsCopiesInOrder) {
  // offload 0 runs 1..11; offload 1, issued at 2, queues behind it: 11..21. prefetch 1
  // (issued at 5 after bwd 2) waits for that offload: 21..31; fwd_keep 1 31..32,
  // bwd 1 32..33; prefetch 0 33..43; fwd_keep 0 43..44, bwd 0 44..45. Stall 26 + 10.
  // (Copies in parallel would give 36.) Peak 60 at bwd 2: a_0, a_1 still on the
  // device, a_2, ā_3, d_3, d_2.
  const std::vector<Op> ops = {ckpt(0), offload(0), ckpt(1), offload(1), keep(2), loss(), bwd(2),
                               prefetch(1), keep(1), bwd(1), prefetch(0), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(three_stage_link_chain(10), ops), 60, 45, 36, 40);
}

TEST(SimulateTimeline, LinksAreFullDuplex) {
  // a_0 is 50 bytes. offload 1 runs 2..12, offload 0 queues behind it 12..62.
  // prefetch 1 (issued at 5) starts at 12 on the other link while offload 0 runs:
  // 12..22 (a half-duplex link would give 62..72 and a total of 126). fwd_keep 1
  // 22..23, bwd 1 23..24, prefetch 0 waits for offload 0: 62..112, fwd_keep 0
  // 112..113, bwd 0 113..114. Stall 17 + 88.
  // Peak 120 at bwd 0 (a_0, ā_1, d_1 and d_0, which is as large as a_0); the 110 at
  // t=24 (d_1, a_0's device copy until 62 and the prefetch's new 50) comes second.
  const std::vector<Op> ops = {ckpt(0), ckpt(1), offload(1), offload(0), keep(2), loss(), bwd(2),
                               prefetch(1), keep(1), bwd(1), prefetch(0), keep(0), bwd(0)};
  expect_timeline(simulate_timeline(three_stage_link_chain(50), ops), 120, 114, 105, 120);
}

TEST(SimulateTimeline, RejectsInvalidOffloads) {
  const InvalidCase cases[] = {
      {"compute needs an activation that is on the host",
       {ckpt(0), offload(0), keep(1), loss(), bwd(1), keep(0), bwd(0)}, 5},
      {"offload of ā (only plain activations move)",
       {keep(0), offload(1), keep(1), loss(), bwd(1), bwd(0)}, 1},
      {"offload of an activation that is not resident",
       {ckpt(0), offload(2), keep(1), loss(), bwd(1), keep(0), bwd(0)}, 1},
      {"prefetch of an activation that was never offloaded",
       {ckpt(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)}, 4},
      {"recomputing an activation that is on the host (it would exist twice once prefetched)",
       {ckpt(0), offload(1), keep(0), prefetch(1), keep(1), loss(), bwd(1), bwd(0)}, 2},
      {"offload index out of range",
       {ckpt(0), offload(9), keep(1), loss(), bwd(1), keep(0), bwd(0)}, 1},
  };
  for (const InvalidCase& ic : cases) {
    const SimResult r = simulate_timeline(offload_chain(1000, 1000), ic.ops);
    EXPECT_FALSE(r.valid) << ic.what;
    EXPECT_FALSE(r.error.empty()) << ic.what;
    EXPECT_EQ(r.error_op, ic.error_op) << ic.what << ": " << r.error;
  }
  // No link in the chain: offloading is impossible.
  Chain no_link = offload_chain(1000, 1000);
  no_link.link.reset();
  const SimResult r =
      simulate_timeline(no_link, {ckpt(0), offload(0), keep(1), loss(), bwd(1), prefetch(0), keep(0), bwd(0)});
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.error_op, 1);
}

// Note [Offloading saved state]: two stages saving 10x their 100 B output; 900 B
// move in 1 ms each way. Worked out by hand on the timeline:
//   t=0 fwd_keep 0 (+1000 -> 1100); t=2 offload_saved 1 (copy 2..3, -900 at 3),
//   fwd_keep 1 (+1000 -> 2100); t=4 loss (+100), prefetch_saved 1 (+900, copy 4..5),
//   bwd 1 (+100 -> 2300, ends 7); bwd 0 at 7 (ā_1 back since 5), ends 10.
TEST(SimulateTimeline, SavedStateMovesItsBytesBeyondTheOutput) {
  Chain chain = testing::homogeneous_chain(2, 2.0, 3.0, 100, 1000);
  chain.link = Link{900e3, 900e3};
  const Op off{OpKind::OffloadSaved, 1}, pre{OpKind::PrefetchSaved, 1};
  const SimResult ahead = simulate_timeline(chain, {keep(0), off, keep(1), loss(), pre, bwd(1), bwd(0)});
  ASSERT_TRUE(ahead.valid) << ahead.error;
  EXPECT_EQ(ahead.peak_bytes, 2300);
  EXPECT_DOUBLE_EQ(ahead.time_ms, 10.0);
  EXPECT_DOUBLE_EQ(ahead.stall_ms, 0.0);
  EXPECT_DOUBLE_EQ(ahead.copy_ms, 2.0);
  // Just in time: 900 B fewer at bwd 1, and bwd 0 waits the whole 1 ms copy.
  const SimResult late = simulate_timeline(chain, {keep(0), off, keep(1), loss(), bwd(1), pre, bwd(0)});
  ASSERT_TRUE(late.valid) << late.error;
  EXPECT_EQ(late.peak_bytes, 2100);
  EXPECT_DOUBLE_EQ(late.time_ms, 11.0);
  EXPECT_DOUBLE_EQ(late.stall_ms, 1.0);
  // The hollow ā_1 still serves as the input of stage 1, but bwd 0 needs it whole.
  const SimResult missing = simulate_timeline(chain, {keep(0), off, keep(1), loss(), bwd(1), bwd(0)});
  EXPECT_FALSE(missing.valid);
  EXPECT_EQ(missing.error_op, 5);
  const SimResult never = simulate_timeline(chain, {keep(0), off, keep(1), loss(), bwd(1)});
  EXPECT_FALSE(never.valid);
  const SimResult plain = simulate_timeline(chain, {ckpt(0), Op{OpKind::OffloadSaved, 1}, keep(1), loss(), bwd(1), keep(0), bwd(0)});
  EXPECT_FALSE(plain.valid);  // a plain a_1 has no saved state
  EXPECT_EQ(plain.error_op, 1);
}

// Note [Carried bytes] in solver/chain/chain.h, checked against a model that knows tensors
// rather than the rule: every activation is a list of byte ranges of named buffers (a
// stage's output reuses the first c_{i+1} bytes of its input's ranges and adds a
// buffer of its own; ā adds one more; gradients the same with buffers of their own),
// and the device holds the union of the buffers of what is resident. Replaying
// docs/formats.md, "Operations and memory without offload: the sequential simulator"'s ops on it
// must give the simulator's peak, op for op.
class TensorLevelReplay {
 public:
  explicit TensorLevelReplay(const Chain& chain) : chain_(chain) {
    const int L = chain.length();
    act_.resize(L + 2);
    grad_.resize(L + 2);
    act_[0] = {fresh(chain.x(0))};
    grad_[0] = {fresh(chain.x(0))};
    for (int k = 1; k <= L; ++k) {
      act_[k] = prefix(act_[k - 1], chain.carried(k));
      act_[k].push_back(fresh(chain.x(k) - chain.carried(k)));
      grad_[k] = prefix(grad_[k - 1], chain.carried(k));
      grad_[k].push_back(fresh(chain.x(k) - chain.carried(k)));
    }
    saved_extra_.resize(L + 2);
    for (int k = 1; k <= L; ++k) saved_extra_[k] = fresh(chain.xbar(k) - chain.x(k));
  }

  // The peak of a valid schedule: docs/formats.md, "Operations and memory without offload: the
  // sequential simulator"'s ops, and the moves of a_k's own bytes
  // and ending carry (Note [Carried bytes may leave] in solver/chain/simulate.h), taken as
  // instant -- as a timeline with a fast link and a wait_offloads after each offload
  // counts them. A move takes the bytes at a_k's positions [lo, hi) off the device
  // whoever holds them; which activations do is recorded in `moves`.
  struct Move { Op op; std::vector<int> holders; bool every_holder_kept = true; };
  std::vector<Move> moves;
  int64_t peak(const std::vector<Op>& ops) {
    const int L = chain_.length();
    std::vector<char> plain(L + 2, 0), saved(L + 2, 0);
    plain[0] = 1;
    hold(act_[0], +1);
    int64_t peak = resident();
    for (const Op& op : ops) {
      const int i = op.index;
      int64_t tmp = 0;
      switch (op.kind) {
        case OpKind::FwdKeep:
          hold(act_[i + 1], +1);
          hold({saved_extra_[i + 1]}, +1);
          saved[i + 1] = 1;
          tmp = chain_.ftmp_keep(i);
          break;
        case OpKind::FwdCkpt:
        case OpKind::FwdDrop:
          hold(act_[i + 1], +1);
          plain[i + 1] = 1;
          tmp = chain_.ftmp(i);
          break;
        case OpKind::Loss:
          hold(grad_[L], +1);
          tmp = chain_.btmp(L);
          break;
        case OpKind::Bwd:
          hold(grad_[i], +1);
          tmp = chain_.btmp(i);
          break;
        case OpKind::OffloadInput:
        case OpKind::OffloadCarried:
        case OpKind::PrefetchInput:
        case OpKind::PrefetchCarried: {
          const bool own = op.kind == OpKind::OffloadInput || op.kind == OpKind::PrefetchInput;
          const int64_t hi = own ? chain_.x(i) : chain_.carried(i);
          const int64_t lo = own ? std::max(chain_.carried(i), chain_.carried(i + 1)) : chain_.carried(i + 1);
          const bool out = op.kind == OpKind::OffloadInput || op.kind == OpKind::OffloadCarried;
          Move m{op, {}, true};
          for (int h = 0; h <= L; ++h) {
            if (!reaches(act_[h], act_[i], lo, hi)) continue;
            m.holders.push_back(h);
            m.every_holder_kept = m.every_holder_kept && saved[h + 1];
          }
          if (out) moves.push_back(m);
          mark(act_[i], lo, hi, out);
          break;
        }
        default:
          break;
      }
      peak = std::max(peak, resident() + tmp);
      if (op.kind == OpKind::FwdDrop) { hold(act_[i], -1); plain[i] = 0; }
      if (op.kind == OpKind::Loss && plain[L]) { hold(act_[L], -1); plain[L] = 0; }
      if (op.kind == OpKind::Bwd) {
        hold(grad_[i + 1], -1);
        hold(act_[i + 1], -1);
        hold({saved_extra_[i + 1]}, -1);
        saved[i + 1] = 0;
        if (plain[i]) { hold(act_[i], -1); plain[i] = 0; }
      }
    }
    return peak;
  }

 private:
  struct Range { int buffer; int64_t bytes; };  // the first `bytes` of a buffer
  Range fresh(int64_t bytes) {
    sizes_.push_back(bytes);
    on_host_.emplace_back(static_cast<size_t>(bytes), 0);
    return {static_cast<int>(sizes_.size()) - 1, bytes};
  }
  static std::vector<Range> prefix(const std::vector<Range>& of, int64_t bytes) {
    std::vector<Range> out;
    for (const Range& r : of) {
      if (bytes <= 0) break;
      out.push_back({r.buffer, std::min(r.bytes, bytes)});
      bytes -= r.bytes;
    }
    return out;
  }
  // A buffer is on the device while anything resident refers to any of its bytes;
  // prefixes of one buffer are ranges of the same allocation, so the whole of what
  // its holders use -- their longest range -- counts.
  void hold(const std::vector<Range>& ranges, int delta) {
    for (const Range& r : ranges) {
      if (r.bytes == 0) continue;
      held_.push_back({r.buffer, r.bytes, delta});
    }
  }
  int64_t resident() const {
    std::vector<std::vector<int64_t>> live(sizes_.size());
    for (const auto& h : held_) {
      auto& v = live[static_cast<size_t>(h.buffer)];
      if (h.delta > 0) v.push_back(h.bytes);
      else v.erase(std::find(v.begin(), v.end(), h.bytes));
    }
    int64_t total = 0;
    for (size_t b = 0; b < live.size(); ++b) {
      if (live[b].empty()) continue;
      const int64_t used = *std::max_element(live[b].begin(), live[b].end());
      for (int64_t o = 0; o < used; ++o) total += on_host_[b][static_cast<size_t>(o)] ? 0 : 1;
    }
    return total;
  }
  // Calls f(buffer, offset) for each byte at positions [lo, hi) of an activation.
  template <typename F>
  static void for_each_byte(const std::vector<Range>& act, int64_t lo, int64_t hi, F f) {
    int64_t position = 0;
    for (const Range& r : act) {
      for (int64_t o = 0; o < r.bytes; ++o, ++position)
        if (position >= lo && position < hi) f(r.buffer, o);
    }
  }
  void mark(const std::vector<Range>& act, int64_t lo, int64_t hi, bool out) {
    for_each_byte(act, lo, hi, [&](int b, int64_t o) { on_host_[static_cast<size_t>(b)][static_cast<size_t>(o)] = out; });
  }
  // Whether `holder` holds any byte at positions [lo, hi) of `act`.
  static bool reaches(const std::vector<Range>& holder, const std::vector<Range>& act, int64_t lo, int64_t hi) {
    bool found = false;
    for_each_byte(act, lo, hi, [&](int b, int64_t o) {
      for (const Range& r : holder) found = found || (r.buffer == b && o < r.bytes);
    });
    return found;
  }

  struct Held { int buffer; int64_t bytes; int delta; };
  const Chain& chain_;
  std::vector<std::vector<Range>> act_, grad_;
  std::vector<Range> saved_extra_;
  std::vector<int64_t> sizes_;
  std::vector<std::vector<char>> on_host_;  // per buffer and byte
  std::vector<Held> held_;
};

// Random chains where most stages pass part of their input on (Note [Carried bytes]).
testing::RandomChainOptions carrying(int length, int64_t unit_bytes, int64_t max_units) {
  testing::RandomChainOptions o;
  o.length = length;
  o.unit_bytes = unit_bytes;
  o.max_units = max_units;
  o.carry_probability = 0.8;
  return o;
}

TEST(SimulateSequential, CountsCarriedBytesOnceAsTensorsDo) {
  std::mt19937_64 rng(606);
  int num_checked = 0, num_below_twice = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const testing::RandomChainOptions o = carrying(1 + trial % 7, 1 + static_cast<int64_t>(rng() % 100), 12);
    const Chain chain = testing::random_chain(rng, o);
    Chain counted_twice = chain;
    for (Stage& st : counted_twice.stages) st.carried_bytes = 0;
    for (int k = 0; k < 5; ++k) {
      const std::vector<Op> ops = testing::random_persistent_schedule(o.length, rng);
      const SimResult sim = simulate_sequential(chain, ops);
      ASSERT_TRUE(sim.valid) << sim.error;
      TensorLevelReplay replay(chain);
      EXPECT_EQ(sim.peak_bytes, replay.peak(ops)) << "trial " << trial << ", schedule " << k;
      const SimResult twice = simulate_sequential(counted_twice, ops);
      EXPECT_LE(sim.peak_bytes, twice.peak_bytes);
      if (sim.peak_bytes < twice.peak_bytes) ++num_below_twice;
      ++num_checked;
    }
  }
  EXPECT_EQ(num_checked, 7500);
  EXPECT_GT(num_below_twice, 2000);
}
// The moves of a kept stage's own input bytes and of an ending carry, against the
// tensor-level model: the timeline (a fast link, a wait after each offload) has its
// peak; the bytes each move takes are held by a_k alone (own) or by a_s .. a_k with s
// = first_holder_of_ending_carry(k) (ending carry), and the simulator accepts a move
// exactly when each of those holders' stages has run fwd_keep.
TEST(SimulateTimeline, MovesOfOwnBytesAndEndingCarriesFreeWhatTensorsDo) {
  std::mt19937_64 rng(1807);
  int num_accepted = 0, num_refused = 0, num_carried = 0, num_carried_from_several = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const testing::RandomChainOptions o = carrying(2 + trial % 7, 1 + static_cast<int64_t>(rng() % 20), 10);
    Chain chain = testing::random_chain(rng, o);
    chain.link = Link{1e15, 1e15};
    const std::vector<Op> plain = testing::random_persistent_schedule(o.length, rng);
    // After some fwd_keep k: offload a_k's own bytes and/or its ending carry, wait,
    // and bring them back just before bwd k.
    std::vector<Op> ops;
    std::vector<std::vector<Op>> backs(static_cast<size_t>(o.length));
    for (const Op& op : plain) {
      if (op.kind == OpKind::Bwd) {
        for (auto it = backs[op.index].rbegin(); it != backs[op.index].rend(); ++it) ops.push_back(*it);
        backs[op.index].clear();
      }
      ops.push_back(op);
      if (op.kind != OpKind::FwdKeep || rng() % 3 == 0) continue;
      const int k = op.index;
      for (const auto& [out, back, bytes] : {std::tuple{OpKind::OffloadInput, OpKind::PrefetchInput, chain.own_bytes(k)},
                                            std::tuple{OpKind::OffloadCarried, OpKind::PrefetchCarried, chain.ending_carried_bytes(k)}}) {
        if (bytes <= 0 || rng() % 4 == 0) continue;
        ops.push_back({out, k});
        ops.push_back({OpKind::WaitOffloads, -1});
        backs[k].push_back({back, k});
      }
    }
    TensorLevelReplay replay(chain);
    const int64_t replay_peak = replay.peak(ops);
    bool holders_kept = true;
    for (const auto& m : replay.moves) {
      const int k = m.op.index;
      ASSERT_FALSE(m.holders.empty());
      EXPECT_EQ(m.holders.back(), k) << "trial " << trial;
      EXPECT_EQ(m.holders.front(), m.op.kind == OpKind::OffloadInput ? k : chain.first_holder_of_ending_carry(k)) << "trial " << trial;
      EXPECT_EQ(static_cast<int>(m.holders.size()), m.holders.back() - m.holders.front() + 1) << "trial " << trial;
      holders_kept = holders_kept && m.every_holder_kept;
      if (m.op.kind == OpKind::OffloadCarried) {
        ++num_carried;
        num_carried_from_several += m.holders.size() > 2;
      }
    }
    const SimResult sim = simulate_timeline(chain, ops);
    EXPECT_EQ(sim.valid, holders_kept) << "trial " << trial << ": " << sim.error;
    if (!sim.valid) {
      EXPECT_NE(sim.error.find("has not run fwd_keep"), std::string::npos) << sim.error;
      ++num_refused;
      continue;
    }
    EXPECT_EQ(sim.peak_bytes, replay_peak) << "trial " << trial;
    ++num_accepted;
  }
  EXPECT_GT(num_accepted, 500);
  EXPECT_GT(num_refused, 100);
  EXPECT_GT(num_carried, 500);
  EXPECT_GT(num_carried_from_several, 50);
}

// An activation that shares carried bytes with another one on the device cannot move:
// the neighbour keeps those bytes, and a copy brought back would not be its tensor.
TEST(SimulateTimeline, RefusesToMoveAnActivationThatSharesCarriedBytes) {
  Chain chain = testing::homogeneous_chain(3, 1.0, 2.0, 100, 300);
  chain.stages[1].carried_bytes = 60;  // a_2 holds a_1's first 60 bytes
  chain.link = Link{1e6, 1e6};
  const SimResult shared = simulate_timeline(chain, {ckpt(0), ckpt(1), offload(1), keep(2), loss(), bwd(2)});
  EXPECT_FALSE(shared.valid);
  EXPECT_EQ(shared.error_op, 2);
  EXPECT_NE(shared.error.find("shares 60 carried bytes"), std::string::npos) << shared.error;
  // With a_2 gone (fwd_drop 1), a_1 -> a_2 -> nothing shared with a_0: a_2 may move.
  const std::vector<Op> alone = {ckpt(0), drop(1), offload(2), prefetch(2), keep(2), loss(), bwd(2),
                                 ckpt(0), keep(1), bwd(1), keep(0), bwd(0)};
  const SimResult moved = simulate_timeline(chain, alone);
  EXPECT_TRUE(moved.valid) << moved.error;
}

// Note [A kept stage's input may leave] (simulate.h), on the chain of
// SavedStateMovesItsBytesBeyondTheOutput (a_k = 100 B, ā_k = 1000 B, fwd 2 ms, bwd
// 3 ms), over a 100 kB/s link (100 B in 1 ms each way):
//   t=0 keep 0 (+1000 -> 1100), ends 2; offload_input 0 copies 2..3 and frees a_0's
//   100 B at 3; keep 1 (+1000 -> 2100 at 2), ends 4; loss (+100 -> 2100); bwd 1
//   (+100 -> 2200), ends 7 (-1100); prefetch_input 0 at 7 (+100, copy 7..8); bwd 0
//   waits for it: starts 8, ends 11.
// Kept in place, a_0 makes bwd 1's peak 2300 and the step 10 ms.
TEST(SimulateTimeline, AKeptStagesInputMovesItsOwnBytes) {
  Chain chain = testing::homogeneous_chain(2, 2.0, 3.0, 100, 1000);
  chain.link = Link{100e3, 100e3};
  const Op out{OpKind::OffloadInput, 0}, back{OpKind::PrefetchInput, 0};
  const SimResult late = simulate_timeline(chain, {keep(0), out, keep(1), loss(), bwd(1), back, bwd(0)});
  ASSERT_TRUE(late.valid) << late.error;
  EXPECT_EQ(late.peak_bytes, 2200);
  EXPECT_DOUBLE_EQ(late.time_ms, 11.0);
  EXPECT_DOUBLE_EQ(late.stall_ms, 1.0);
  EXPECT_DOUBLE_EQ(late.copy_ms, 2.0);
  ASSERT_EQ(late.offload_done_before.size(), 7u);
  EXPECT_EQ(late.offload_done_before[1], 3);  // freed before the loss, the first op to allocate after t=3
  // Brought back ahead, during bwd 1: no stall, and bwd 1 holds it again.
  const SimResult ahead = simulate_timeline(chain, {keep(0), out, keep(1), loss(), back, bwd(1), bwd(0)});
  ASSERT_TRUE(ahead.valid) << ahead.error;
  EXPECT_EQ(ahead.peak_bytes, 2300);
  EXPECT_DOUBLE_EQ(ahead.time_ms, 10.0);
  EXPECT_DOUBLE_EQ(ahead.stall_ms, 0.0);
  const SimResult kept = simulate_timeline(chain, {keep(0), keep(1), loss(), bwd(1), bwd(0)});
  EXPECT_EQ(kept.peak_bytes, 2300);
  EXPECT_DOUBLE_EQ(kept.time_ms, 10.0);
}

TEST(SimulateTimeline, RefusesToReadAKeptStagesInputWhileItIsAway) {
  Chain chain = testing::homogeneous_chain(2, 2.0, 3.0, 100, 1000);
  chain.link = Link{100e3, 100e3};
  const Op out0{OpKind::OffloadInput, 0}, back0{OpKind::PrefetchInput, 0}, out1{OpKind::OffloadInput, 1};
  const auto error_of = [&](const std::vector<Op>& ops) {
    const SimResult r = simulate_timeline(chain, ops);
    EXPECT_FALSE(r.valid);
    return std::make_pair(r.error_op, r.error);
  };
  // Before its stage ran: a plain input moves with `offload`.
  auto [op, error] = error_of({out0, keep(0), keep(1), loss(), bwd(1), back0, bwd(0)});
  EXPECT_EQ(op, 0);
  EXPECT_NE(error.find("has not run fwd_keep"), std::string::npos) << error;
  // bwd 0 reads it.
  std::tie(op, error) = error_of({keep(0), out0, keep(1), loss(), bwd(1), bwd(0)});
  EXPECT_EQ(op, 5);
  EXPECT_NE(error.find("prefetch_input 0 first"), std::string::npos) << error;
  // Twice, or never back.
  std::tie(op, error) = error_of({keep(0), out0, out0, keep(1), loss(), bwd(1), back0, bwd(0)});
  EXPECT_EQ(op, 2);
  std::tie(op, error) = error_of({keep(0), out0, keep(1), loss(), bwd(1)});
  EXPECT_NE(error.find("never prefetched"), std::string::npos) << error;
  // Inside ā_1, a_1 is stage 1's input: it may leave once stage 1 ran, and bwd 0,
  // which needs ā_1 whole, comes after bwd 1, which needs it back.
  EXPECT_TRUE(simulate_timeline(chain, {keep(0), keep(1), out1, loss(), Op{OpKind::PrefetchInput, 1}, bwd(1), bwd(0)}).valid);
  // Without a link nothing moves.
  chain.link.reset();
  std::tie(op, error) = error_of({keep(0), out0, keep(1), loss(), bwd(1), back0, bwd(0)});
  EXPECT_EQ(op, 1);
}

// Carried prefixes stay with the neighbours that hold them too (docs/formats.md
// docs/formats.md, "Carried bytes"): a_1 shares 30 B with a_0 and 60 B with a_2, so 40 of its 100 B move.
TEST(SimulateTimeline, AKeptStagesInputLeavesItsCarriedBytes) {
  Chain chain = testing::homogeneous_chain(3, 1.0, 2.0, 100, 300);
  chain.stages[0].carried_bytes = 30;
  chain.stages[1].carried_bytes = 60;
  chain.link = Link{40e3, 40e3};  // 40 B in 1 ms
  EXPECT_EQ(chain.own_bytes(0), 70);
  EXPECT_EQ(chain.own_bytes(1), 40);
  EXPECT_EQ(chain.own_bytes(2), 40);
  const Op wait{OpKind::WaitOffloads, -1};
  const SimResult kept = simulate_timeline(chain, {keep(0), keep(1), keep(2), loss(), bwd(2), bwd(1), bwd(0)});
  const SimResult moved = simulate_timeline(chain, {keep(0), keep(1), Op{OpKind::OffloadInput, 1}, wait, keep(2), loss(),
                                                    bwd(2), Op{OpKind::PrefetchInput, 1}, bwd(1), bwd(0)});
  ASSERT_TRUE(kept.valid) << kept.error;
  ASSERT_TRUE(moved.valid) << moved.error;
  EXPECT_EQ(moved.peak_bytes, kept.peak_bytes - 40);
  EXPECT_DOUBLE_EQ(moved.copy_ms, 2.0);
}

}  // namespace
}  // namespace memopt::solver

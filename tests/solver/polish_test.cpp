// polish_test.cpp: the local search of Note [Polishing a plan's copies] (solver/search/polish.h):
// what it returns fits and is never slower than what it was given, it moves no data
// twice, and on a chain worked out by hand it hides a just-in-time prefetch.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/dp/offload.h"
#include "solver/search/polish.h"
#include "solver/dp/rotor.h"
#include "solver/chain/plan_edits.h"
#include "solver/chain/simulate.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

int num_copies(const std::vector<Op>& ops) {
  return static_cast<int>(std::count_if(ops.begin(), ops.end(), [](const Op& op) { return is_copy(op.kind); }));
}

// Each a_k and each ā_k at most once in each direction, as in the oracle (Note
// [What the oracle enumerates] in tests/solver/exhaustive_oracle.h).
bool moves_each_data_at_most_once_each_way(const std::vector<Op>& ops) {
  std::map<std::pair<OpKind, int>, int> count;
  for (const Op& op : ops)
    if (is_copy(op.kind) && ++count[{op.kind, op.index}] > 1) return false;
  return true;
}

// Worked out by hand, with a link of 1000 B/s (1 byte = 1 ms). Stage 0 saves 4 bytes
// beyond its output, offloaded during stage 1's 4 ms forward; stage 2's forward
// needs a transient that does not fit beside them.
Chain worked_chain() {
  Chain chain;
  chain.input_bytes = 1;
  chain.stages.push_back({"s0", 1.0, 1.0, 1, 5, 0, 0});
  chain.stages.push_back({"s1", 4.0, 2.0, 1, 1, 0, 0});
  chain.stages.push_back({"s2", 1.0, 2.0, 1, 1, 10, 0});
  chain.link = Link{1000.0, 1000.0};
  return chain;
}

// Random chains, with and without carried bytes, at budgets from tight to loose,
// polished from the plans of the offload DP, the recompute DP and offload-all.
TEST(Polish, FitsIsNeverSlowerAndMovesNoDataTwice) {
  std::mt19937_64 rng(41);
  int num_polished = 0, num_faster = 0, num_fewer_copies = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Chain chain = testing::linked_chain(rng, trial, 1 + trial % 10);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t store_all = store_all_peak_bytes(chain);
    for (const int percent : {40, 60, 80, 100}) {
      const int64_t budget = std::max<int64_t>(1, store_all * percent / 100);
      const DpOptions dp{static_cast<int>(std::min<int64_t>(budget, 400)), false, 1};
      for (const auto& start : {solve_offload(chain, budget, dp), solve_recompute(chain, budget, dp),
                                offload_all(chain, budget, dp)}) {
        if (!start) continue;
        const SimResult before = simulate_timeline(chain, *start);
        ASSERT_TRUE(fits(before, budget)) << before.error;
        const std::vector<Op> polished = polish_copies(chain, budget, *start);
        const SimResult after = simulate_timeline(chain, polished);
        ASSERT_TRUE(after.valid) << after.error;
        EXPECT_LE(after.peak_bytes, budget);
        EXPECT_LE(after.time_ms, before.time_ms);
        EXPECT_TRUE(moves_each_data_at_most_once_each_way(polished));
        ++num_polished;
        num_faster += after.time_ms < before.time_ms;
        num_fewer_copies += after.time_ms == before.time_ms && num_copies(polished) < num_copies(*start);
      }
    }
  }
  RecordProperty("polished", num_polished);
  RecordProperty("faster", num_faster);
  RecordProperty("same_time_fewer_copies", num_fewer_copies);
  std::printf("polish: %d plans, %d made faster, %d as fast with fewer copies\n", num_polished, num_faster,
              num_fewer_copies);
  // Not vacuous: the moves find something on these chains.
  EXPECT_GT(num_faster, 0);
  EXPECT_GT(num_fewer_copies, 0);
}

// worked_chain(): ā_1 must leave to make room for stage 2's transient. Brought back
// just in time (after bwd 1) the copy stalls bwd 0 for its whole 4 ms: 11 + 4 = 15
// ms. Issued before bwd 2 it hides behind bwd 2 and bwd 1 (2 + 2 ms): 11 ms, every op
// back to back.
TEST(Polish, HidesAJustInTimePrefetchBehindEarlierBackwards) {
  Chain chain = worked_chain();
  const std::vector<Op> just_in_time = {{OpKind::FwdKeep, 0}, {OpKind::OffloadSaved, 1}, {OpKind::FwdKeep, 1},
                                        {OpKind::FwdKeep, 2}, {OpKind::Loss, -1},          {OpKind::Bwd, 2},
                                        {OpKind::Bwd, 1},     {OpKind::PrefetchSaved, 1},  {OpKind::Bwd, 0}};
  std::vector<Op> ahead = just_in_time;
  ahead.erase(ahead.begin() + 7);
  ahead.insert(ahead.begin() + 5, Op{OpKind::PrefetchSaved, 1});
  const SimResult late = simulate_timeline(chain, just_in_time), early = simulate_timeline(chain, ahead);
  ASSERT_TRUE(late.valid) << late.error;
  ASSERT_TRUE(early.valid) << early.error;
  const int64_t budget = std::max(late.peak_bytes, early.peak_bytes);
  EXPECT_EQ(late.time_ms, 15.0);
  EXPECT_EQ(early.time_ms, 11.0);
  // Keeping ā_1 on the device instead does not fit: the offload is needed.
  EXPECT_GT(simulate_timeline(chain, store_all_ops(chain)).peak_bytes, budget);

  const std::vector<Op> polished = polish_copies(chain, budget, just_in_time);
  const SimResult r = simulate_timeline(chain, polished);
  ASSERT_TRUE(fits(r, budget));
  EXPECT_EQ(r.time_ms, sum_fwd_bwd_ms(chain));
  EXPECT_NE(std::find(polished.begin(), polished.end(), Op{OpKind::OffloadSaved, 1}), polished.end());
}

// The same chain from store-all, which does not fit: the repair (Note [Repairing a
// plan over the budget]) offloads ā_1 to make room for stage 2's transient, and the
// polish then hides its prefetch: the 11 ms of the hand-made plan.
TEST(Polish, RepairsStoreAllDownToTheBudget) {
  Chain chain = worked_chain();
  const std::vector<Op> start = store_all_ops(chain);
  const SimResult over = simulate_timeline(chain, start);
  ASSERT_TRUE(over.valid) << over.error;
  const int64_t budget = over.peak_bytes - 4;  // ā_1's 4 bytes beyond a_2 must leave
  const std::vector<Op> repaired = polish_copies(chain, budget, start);
  const SimResult r = simulate_timeline(chain, repaired);
  ASSERT_TRUE(fits(r, budget)) << r.error << " peak " << r.peak_bytes;
  EXPECT_EQ(r.time_ms, sum_fwd_bwd_ms(chain));
  EXPECT_NE(std::find(repaired.begin(), repaired.end(), Op{OpKind::OffloadSaved, 1}), repaired.end());
  // Without a link nothing can move: the plan comes back as it was.
  chain.link.reset();
  EXPECT_EQ(polish_copies(chain, budget, start), start);
}

// Random chains: the offload DP's plans at larger budgets, polished down to a
// smaller one. The excess never grows, no data moves twice, and some fit -- some
// faster than the polished DP plan of the smaller budget itself (why `optimal`
// starts there too, Note [Starts over the budget] in solver/search/optimal.cpp).
// Note [The best repair first], on a chain worked by hand (copies of 500 B/s each
// way). Stage 2 is kept where a DP plan recomputes it, which puts the plan 2 bytes
// over a budget of 29. Two round trips each make it fit: ā_3's 5 bytes beyond a_3
// (10 ms out, so the loss must wait for them: 45 ms), or the input a_0's 3 bytes,
// idle between the forward's fwd_ckpt 0 and the recomputation's (6 ms each way, 2 of
// them exposed: 33 ms, the oracle's fastest plan here). ā_3's comes
// first in the scan; the repair must still take a_0's.
TEST(Polish, RepairsWithTheFastestRoundTripThatFits) {
  Chain chain;
  chain.input_bytes = 3;
  chain.stages.push_back({"s0", 2, 4, 4, 7, 0, 0});
  chain.stages.push_back({"s1", 2, 0, 4, 10, 0, 2});
  chain.stages.back().fwd_keep_tmp_bytes = 3;
  chain.stages.back().fwd_nograd_ms = 1;
  chain.stages.push_back({"s2", 4, 4, 5, 10, 2, 0});
  chain.stages.push_back({"s3", 2, 4, 4, 4, 0, 1});
  chain.stages.back().fwd_nograd_ms = 1;
  chain.loss.bwd_ms = 4;
  chain.loss.bwd_tmp_bytes = 3;
  chain.link = Link{500, 500};
  const int64_t budget = 29;
  const std::vector<Op> start = {{OpKind::FwdCkpt, 0}, {OpKind::FwdDrop, 1}, {OpKind::FwdKeep, 2}, {OpKind::FwdKeep, 3},
                                 {OpKind::Loss, -1},   {OpKind::Bwd, 3},     {OpKind::Bwd, 2},     {OpKind::FwdCkpt, 0},
                                 {OpKind::FwdKeep, 1}, {OpKind::Bwd, 1},     {OpKind::FwdKeep, 0}, {OpKind::Bwd, 0}};
  const SimResult over = simulate_timeline(chain, start);
  ASSERT_TRUE(over.valid) << over.error;
  EXPECT_EQ(over.peak_bytes, budget + 2);
  std::vector<Op> saved_state_out = start;
  saved_state_out.insert(saved_state_out.begin() + 3, {OpKind::OffloadSaved, 3});
  saved_state_out.insert(saved_state_out.begin() + 6, {{OpKind::WaitOffloads, -1}});
  saved_state_out.insert(saved_state_out.begin() + 8, {OpKind::PrefetchSaved, 3});
  const SimResult slow = simulate_timeline(chain, saved_state_out);
  ASSERT_TRUE(fits(slow, budget)) << slow.error << " peak " << slow.peak_bytes;
  EXPECT_EQ(slow.time_ms, 45);
  const std::vector<Op> repaired = polish_copies(chain, budget, start);
  const SimResult r = simulate_timeline(chain, repaired);
  ASSERT_TRUE(fits(r, budget)) << r.error << " peak " << r.peak_bytes;
  EXPECT_EQ(r.time_ms, 33);
  EXPECT_NE(std::find(repaired.begin(), repaired.end(), Op{OpKind::Offload, 0}), repaired.end());
  EXPECT_EQ(std::find(repaired.begin(), repaired.end(), Op{OpKind::WaitOffloads, -1}), repaired.end());
}

// The recompute move, on a chain worked by hand (copies of 500 B/s each way, a
// budget of 34 bytes). The plan recomputes stages 0 and 1 after bwd 2 and brings
// ā_3's 3 bytes back behind bwd 3: 6 ms against bwd 3's 5, so bwd 2 waits 1 ms.
// Running stage 0's recomputation (5 ms, which reads nothing on the link) before
// bwd 2 fills that wait: 29 -> 28 ms, the oracle's fastest plan here.
TEST(Polish, RunsARecomputationWhileABackwardWaitsForItsPrefetch) {
  Chain chain;
  chain.input_bytes = 6;
  chain.stages.push_back({"s0", 5, 1, 2, 4, 0, 16});
  chain.stages.back().fwd_nograd_ms = 3;
  chain.stages.push_back({"s1", 1, 2, 2, 7, 0, 0});
  chain.stages.back().fwd_nograd_ms = 0;
  chain.stages.push_back({"s2", 4, 1, 4, 7, 4, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 2;
  chain.stages.push_back({"s3", 6, 5, 4, 5, 4, 0});
  chain.stages.back().fwd_keep_tmp_bytes = 3;
  chain.stages.back().fwd_nograd_ms = 1;
  chain.loss.bwd_tmp_bytes = 13;
  chain.link = Link{500, 500};
  const int64_t budget = 34;
  const std::vector<Op> start = {{OpKind::FwdCkpt, 0},  {OpKind::FwdDrop, 1},       {OpKind::FwdKeep, 2},
                                 {OpKind::OffloadSaved, 3}, {OpKind::FwdKeep, 3},   {OpKind::Loss, -1},
                                 {OpKind::PrefetchSaved, 3}, {OpKind::Bwd, 3},      {OpKind::Bwd, 2},
                                 {OpKind::FwdKeep, 0},  {OpKind::FwdKeep, 1},       {OpKind::Bwd, 1},
                                 {OpKind::Bwd, 0}};
  const SimResult before = simulate_timeline(chain, start);
  ASSERT_TRUE(fits(before, budget)) << before.error << " peak " << before.peak_bytes;
  EXPECT_EQ(before.time_ms, 29);
  const std::vector<Op> polished = polish_copies(chain, budget, start);
  const SimResult r = simulate_timeline(chain, polished);
  ASSERT_TRUE(fits(r, budget)) << r.error << " peak " << r.peak_bytes;
  EXPECT_EQ(r.time_ms, 28);
  const auto at = [&](Op op) { return std::find(polished.begin(), polished.end(), op) - polished.begin(); };
  EXPECT_LT(at({OpKind::FwdKeep, 0}), at({OpKind::Bwd, 2}));
}

// visit(chain, store_all, budget) on `trials` random linked chains of 2 to 10 stages,
// at 30%, 50% and 70% of each one's store-all peak.
template <typename Visit>
void for_each_chain_and_budget(uint64_t seed, int trials, Visit visit) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const Chain chain = testing::linked_chain(rng, trial, 2 + trial % 9);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t store_all = store_all_peak_bytes(chain);
    for (const int percent : {30, 50, 70}) visit(chain, store_all, std::max<int64_t>(1, store_all * percent / 100));
  }
}
// The offload DP's plan at `budget`, with at most `slots` slots.
std::optional<std::vector<Op>> dp_plan(const Chain& chain, int64_t budget, int64_t slots) {
  return solve_offload(chain, budget, {static_cast<int>(std::min<int64_t>(budget, slots)), false, 1});
}

// simulate_to_beat stops only candidates that cannot beat its key, or that end after
// the time it is given (Note [Repairs that end after the best one] in
// solver/search/polish.h), and gives the others simulate_timeline's result bit for
// bit: for the round trips a repair tries, against the plan they are made from (over
// the budget or not) and against the round trip tried before, from the plain start
// and from a shared prefix.
TEST(SimulateToBeat, StopsOnlyCandidatesThatCannotBeatTheKeyOrEndLater) {
  int64_t num_whole = 0, num_stopped_over = 0, num_stopped_late = 0;
  for_each_chain_and_budget(47, 80, [&](const Chain& chain, int64_t store_all, int64_t budget) {
    const auto base = dp_plan(chain, budget + (store_all - budget) / 3, 300);
    if (!base) return;
    const SimResult base_sim = simulate_timeline(chain, *base);
    ASSERT_TRUE(base_sim.valid) << base_sim.error;
    const PlanKey base_key = plan_key(base_sim, *base, budget);
    TimelinePrefix prefix(chain, *base, compute_only_ms(chain, *base), /*rejoin=*/true);
    PlanKey previous_key = base_key;
    for (int k = 0; k < chain.length(); ++k) {
      std::vector<RoundTrip> trips = activation_round_trips(chain, *base, k);
      if (const auto trip = saved_state_round_trip(chain, *base, k)) trips.push_back(*trip);
      for (const RoundTrip& trip : trips) {
        const std::vector<Op> with_out = inserted(*base, trip.made + 1, trip.out);
        for (size_t at = trip.made + 2; at <= trip.reader + 1; ++at) {
          const std::vector<Op> c = inserted(with_out, at, {way_back(trip.out.kind), trip.out.index});
          const SimResult whole = simulate_timeline(chain, c);
          if (!whole.valid) continue;
          const PlanKey key = plan_key(whole, c, budget);
          const double not_after_ms[] = {std::numeric_limits<double>::infinity(), base_sim.time_ms,
                                         0.5 * (base_sim.time_ms + whole.time_ms)};
          for (const PlanKey& to_beat : {base_key, previous_key})
            for (const double after : not_after_ms) {
              const SimResult plain = simulate_to_beat(chain, c, to_beat, budget, after);
              const SimResult resumed = simulate_to_beat(prefix, c, to_beat, budget, after);
              for (const SimResult* r : {&plain, &resumed}) {
                if (r->valid) {
                  ++num_whole;
                  EXPECT_EQ(r->peak_bytes, whole.peak_bytes);
                  EXPECT_EQ(r->time_ms, whole.time_ms);
                  EXPECT_EQ(r->copy_ms, whole.copy_ms);
                  EXPECT_EQ(r->stall_ms, whole.stall_ms);
                  continue;
                }
                ASSERT_TRUE(r->stopped_over || r->stopped_late) << r->error;
                if (r->stopped_over) {
                  ++num_stopped_over;
                  EXPECT_FALSE(key < to_beat) << "stopped over a bound, yet better";
                } else {
                  ++num_stopped_late;
                  EXPECT_TRUE(!(key < to_beat) || whole.time_ms > after) << "stopped late, yet better and in time";
                }
              }
            }
          previous_key = key;
        }
      }
    }
  });
  // Not vacuous: each outcome is common.
  EXPECT_GT(num_whole, 2000);
  EXPECT_GT(num_stopped_over, 200);
  EXPECT_GT(num_stopped_late, 200);
  RecordProperty("whole", std::to_string(num_whole));
  RecordProperty("stopped_over", std::to_string(num_stopped_over));
  RecordProperty("stopped_late", std::to_string(num_stopped_late));
  std::printf("simulate_to_beat: whole %lld, stopped over %lld, stopped late %lld\n", static_cast<long long>(num_whole),
              static_cast<long long>(num_stopped_over), static_cast<long long>(num_stopped_late));
}

TEST(Polish, RepairsPlansOverTheBudget) {
  int num_over = 0, num_repaired = 0, num_faster_than_dp = 0;
  for_each_chain_and_budget(43, 60, [&](const Chain& chain, int64_t store_all, int64_t budget) {
    const auto at_budget = dp_plan(chain, budget, 400);
    const double dp_ms = at_budget ? simulate_timeline(chain, polish_copies(chain, budget, *at_budget)).time_ms
                                   : std::numeric_limits<double>::infinity();
    const auto start = dp_plan(chain, budget + (store_all - budget) / 4, 400);
    if (!start) return;
    const SimResult before = simulate_timeline(chain, *start);
    ASSERT_TRUE(before.valid) << before.error;
    if (before.peak_bytes <= budget) return;
    ++num_over;
    const std::vector<Op> repaired = polish_copies(chain, budget, *start);
    const SimResult after = simulate_timeline(chain, repaired);
    ASSERT_TRUE(after.valid) << after.error;
    EXPECT_LE(after.peak_bytes, before.peak_bytes);
    EXPECT_TRUE(moves_each_data_at_most_once_each_way(repaired));
    if (after.peak_bytes > budget) return;
    ++num_repaired;
    num_faster_than_dp += after.time_ms < dp_ms;
  });
  RecordProperty("over_budget", num_over);
  RecordProperty("repaired", num_repaired);
  RecordProperty("faster_than_the_dp", num_faster_than_dp);
  std::printf("repair: %d plans over the budget, %d made to fit, %d of them faster than the polished DP plan\n",
              num_over, num_repaired, num_faster_than_dp);
  // Not vacuous: some plans are over the budget, and some repairs pay.
  EXPECT_GT(num_over, 0);
  EXPECT_GT(num_faster_than_dp, 0);
}

}  // namespace
}  // namespace memopt::solver

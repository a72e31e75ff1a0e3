// kicks_test.cpp: the search of Note [Kicks out of a local optimum] (solver/search/kicks.h):
// on two 6-stage chains where the polish stops at a local optimum, it reaches the
// plan that the copy-placement MILP (tools/copy_placement_milp.py) proved fastest
// around those compute ops; on random chains it never returns a worse plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "solver/search/budget.h"
#include "solver/search/kicks.h"
#include "solver/dp/offload.h"
#include "solver/search/polish.h"
#include "solver/io/profile_json.h"
#include "solver/chain/simulate.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

// "fwd_keep 0, loss, bwd 0" -> ops.
std::vector<Op> parse_ops(const std::string& text) {
  std::vector<Op> ops;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::stringstream words(item);
    std::string word;
    int index = -1;
    words >> word >> index;
    const std::optional<OpKind> kind = op_kind_from_word(word);
    EXPECT_TRUE(kind.has_value()) << word;
    ops.push_back({kind.value_or(OpKind::Loss), info(kind.value_or(OpKind::Loss)).has_index ? index : -1});
  }
  return ops;
}

Chain chain_of(const std::string& stages) {
  return parse_profile(R"({"format": "memopt.profile", "version": 1, )" + stages + "}", "test").chain;
}

PlanKey key_of(const Chain& chain, const std::vector<Op>& ops, int64_t budget) {
  return plan_key(simulate_timeline(chain, ops), ops, budget);
}

// A recomputation run one op later and a prefetch moved ahead of another: each alone
// makes the plan 2 ms slower (82 ms against 80), both together 4 ms faster.
TEST(Kicks, MoveARecomputationAndAPrefetchTogether) {
  const Chain chain = chain_of(R"("input_bytes": 6, "link": {"d2h_bytes_per_s": 500, "h2d_bytes_per_s": 1000},
    "loss": {"bwd_ms": 2, "bwd_tmp_bytes": 0}, "stages": [
    {"name": "s0", "fwd_ms": 2, "fwd_nograd_ms": 7, "bwd_ms": 7, "out_bytes": 3, "saved_bytes": 11, "fwd_tmp_bytes": 2, "fwd_keep_tmp_bytes": 4, "bwd_tmp_bytes": 1},
    {"name": "s1", "fwd_ms": 6, "fwd_nograd_ms": 2, "bwd_ms": 4, "out_bytes": 8, "saved_bytes": 13, "fwd_tmp_bytes": 0, "fwd_keep_tmp_bytes": 0, "bwd_tmp_bytes": -1},
    {"name": "s2", "fwd_ms": 6, "fwd_nograd_ms": 8, "bwd_ms": 7, "out_bytes": 5, "saved_bytes": 10, "fwd_tmp_bytes": 3, "fwd_keep_tmp_bytes": 0, "bwd_tmp_bytes": -1},
    {"name": "s3", "fwd_ms": 8, "fwd_nograd_ms": 2, "bwd_ms": 5, "out_bytes": 6, "saved_bytes": 9, "fwd_tmp_bytes": 4, "fwd_keep_tmp_bytes": 4, "bwd_tmp_bytes": 4},
    {"name": "s4", "fwd_ms": 6, "fwd_nograd_ms": 5, "bwd_ms": 3, "out_bytes": 8, "saved_bytes": 16, "fwd_tmp_bytes": 1, "fwd_keep_tmp_bytes": 2, "bwd_tmp_bytes": 0},
    {"name": "s5", "fwd_ms": 6, "fwd_nograd_ms": 2, "bwd_ms": 5, "out_bytes": 4, "saved_bytes": 5, "fwd_tmp_bytes": 3, "fwd_keep_tmp_bytes": 0, "bwd_tmp_bytes": 4}])");
  const int64_t budget = 56;
  const std::string head =
      "fwd_ckpt 0, offload 0, fwd_drop 1, fwd_keep 2, offload_saved 3, fwd_keep 3, offload_saved 4, fwd_keep 4, "
      "fwd_keep 5, loss, bwd 5, prefetch_saved 4, bwd 4, ";
  const std::vector<Op> start = parse_ops(head + "prefetch 0, bwd 3, prefetch_saved 3, fwd_keep 0, bwd 2, fwd_keep 1, bwd 1, bwd 0");
  const std::vector<Op> later = parse_ops(head + "prefetch 0, bwd 3, prefetch_saved 3, bwd 2, fwd_keep 0, fwd_keep 1, bwd 1, bwd 0");
  const std::vector<Op> ahead = parse_ops(head + "prefetch_saved 3, prefetch 0, bwd 3, fwd_keep 0, bwd 2, fwd_keep 1, bwd 1, bwd 0");
  const std::vector<Op> both = parse_ops(head + "prefetch_saved 3, prefetch 0, bwd 3, bwd 2, fwd_keep 0, fwd_keep 1, bwd 1, bwd 0");
  const SimResult s = simulate_timeline(chain, start), l = simulate_timeline(chain, later),
                  a = simulate_timeline(chain, ahead), b = simulate_timeline(chain, both);
  ASSERT_TRUE(fits(s, budget)) << s.error;
  ASSERT_TRUE(fits(l, budget)) << l.error;
  ASSERT_TRUE(fits(a, budget)) << a.error;
  ASSERT_TRUE(fits(b, budget)) << b.error;
  EXPECT_EQ(s.time_ms, 80.0);
  EXPECT_EQ(l.time_ms, 82.0);
  EXPECT_EQ(a.time_ms, 82.0);
  EXPECT_EQ(b.time_ms, 76.0);

  EXPECT_EQ(polish_copies(chain, budget, start), start);  // a local optimum of the polish
  const std::vector<Op> kicked = kick_search(chain, budget, start);
  const SimResult r = simulate_timeline(chain, kicked);
  ASSERT_TRUE(fits(r, budget)) << r.error;
  EXPECT_EQ(r.time_ms, 76.0);  // the MILP's optimum around these compute ops
}

// One saved state's round trip swapped for another's: dropping ā_5's overflows the
// budget by a byte, adding ā_3's alone costs only copies; together 0.5 ms faster.
TEST(Kicks, SwapOneRoundTripForAnother) {
  const Chain chain = chain_of(R"("input_bytes": 8, "link": {"d2h_bytes_per_s": 500, "h2d_bytes_per_s": 2000},
    "loss": {"bwd_ms": 3, "bwd_tmp_bytes": 0}, "stages": [
    {"name": "s0", "fwd_ms": 2, "fwd_nograd_ms": 9, "bwd_ms": 6, "out_bytes": 1, "saved_bytes": 3, "fwd_tmp_bytes": 4, "fwd_keep_tmp_bytes": 1, "bwd_tmp_bytes": 1},
    {"name": "s1", "fwd_ms": 5, "fwd_nograd_ms": 9, "bwd_ms": 6, "out_bytes": 5, "saved_bytes": 7, "fwd_tmp_bytes": 3, "fwd_keep_tmp_bytes": 4, "bwd_tmp_bytes": -1},
    {"name": "s2", "fwd_ms": 9, "fwd_nograd_ms": 7, "bwd_ms": 3, "out_bytes": 2, "saved_bytes": 4, "fwd_tmp_bytes": 2, "fwd_keep_tmp_bytes": 3, "bwd_tmp_bytes": 0},
    {"name": "s3", "fwd_ms": 8, "fwd_nograd_ms": 7, "bwd_ms": 6, "out_bytes": 1, "saved_bytes": 7, "fwd_tmp_bytes": 4, "fwd_keep_tmp_bytes": 1, "bwd_tmp_bytes": 3},
    {"name": "s4", "fwd_ms": 9, "fwd_nograd_ms": 2, "bwd_ms": 5, "out_bytes": 1, "saved_bytes": 2, "fwd_tmp_bytes": 2, "fwd_keep_tmp_bytes": 0, "bwd_tmp_bytes": 0},
    {"name": "s5", "fwd_ms": 8, "fwd_nograd_ms": 4, "bwd_ms": 7, "out_bytes": 2, "saved_bytes": 8, "fwd_tmp_bytes": 3, "fwd_keep_tmp_bytes": 1, "bwd_tmp_bytes": 1}])");
  const int64_t budget = 24;
  const std::vector<Op> start = parse_ops(
      "fwd_ckpt 0, offload 0, fwd_keep 1, fwd_keep 2, wait_offloads, offload_saved 2, fwd_keep 3, offload_saved 4, "
      "fwd_keep 4, wait_offloads, offload_saved 5, fwd_keep 5, loss, bwd 5, prefetch_saved 5, prefetch_saved 4, "
      "bwd 4, bwd 3, prefetch_saved 2, bwd 2, prefetch 0, bwd 1, fwd_keep 0, bwd 0");
  const std::vector<Op> swapped = parse_ops(
      "fwd_ckpt 0, offload 0, fwd_keep 1, fwd_keep 2, wait_offloads, offload_saved 2, offload_saved 3, fwd_keep 3, "
      "offload_saved 4, fwd_keep 4, wait_offloads, fwd_keep 5, loss, bwd 5, prefetch_saved 4, bwd 4, "
      "prefetch_saved 3, bwd 3, prefetch_saved 2, bwd 2, prefetch 0, bwd 1, fwd_keep 0, bwd 0");
  const SimResult s = simulate_timeline(chain, start), w = simulate_timeline(chain, swapped);
  ASSERT_TRUE(fits(s, budget)) << s.error;
  ASSERT_TRUE(fits(w, budget)) << w.error;
  EXPECT_EQ(s.time_ms, 91.5);
  EXPECT_EQ(w.time_ms, 91.0);
  // ā_5's round trip dropped alone: faster, but a byte over.
  std::vector<Op> dropped_only = start;
  std::erase(dropped_only, Op{OpKind::OffloadSaved, 5});
  std::erase(dropped_only, Op{OpKind::PrefetchSaved, 5});
  EXPECT_EQ(simulate_timeline(chain, dropped_only).peak_bytes, budget + 1);

  EXPECT_EQ(polish_copies(chain, budget, start), start);
  const std::vector<Op> kicked = kick_search(chain, budget, start);
  const SimResult r = simulate_timeline(chain, kicked);
  ASSERT_TRUE(fits(r, budget)) << r.error;
  EXPECT_EQ(r.time_ms, 91.0);
}

// check(chain, budget, plan) for the offload DP's plan, where there is one, on
// `trials` random linked chains of 2 to 8 stages at 45%, 65% and 85% of store-all.
template <typename Check>
void for_each_dp_plan(uint64_t seed, int trials, Check check) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const Chain chain = testing::linked_chain(rng, trial, 2 + trial % 7);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t store_all = store_all_peak_bytes(chain);
    for (const int percent : {45, 65, 85}) {
      const int64_t budget = std::max<int64_t>(1, store_all * percent / 100);
      const auto dp = solve_offload(chain, budget, {static_cast<int>(std::min<int64_t>(budget, 400)), false, 1});
      if (dp) check(chain, budget, *dp);
    }
  }
}

// From the offload DP's plans on random chains: always valid, never over a budget the
// plan met, never worse by the polish's key, and better somewhere.
TEST(Kicks, NeverReturnAWorsePlan) {
  int num_searched = 0, num_better = 0;
  for_each_dp_plan(7, 80, [&](const Chain& chain, int64_t budget, const std::vector<Op>& dp) {
    const std::vector<Op> polished = polish_copies(chain, budget, dp);
    const std::vector<Op> kicked = kick_search(chain, budget, polished);
    const SimResult r = simulate_timeline(chain, kicked);
    ASSERT_TRUE(fits(r, budget)) << r.error;
    EXPECT_LE(key_of(chain, kicked, budget), key_of(chain, polished, budget));
    ++num_searched;
    num_better += key_of(chain, kicked, budget) < key_of(chain, polished, budget);
  });
  std::printf("kicks: %d plans searched, %d improved\n", num_searched, num_better);
  EXPECT_GT(num_searched, 60);
  EXPECT_GT(num_better, 0);
}

// Note [Kicks that cannot be faster] in solver/search/kicks.h: the polish never makes a
// plan faster than the sum of its compute ops, so a kick that re-runs a kept stage and
// whose compute ops already sum past the polished plan's time cannot win; such kicks
// exist on these chains, so the shortcut is not vacuous.
TEST(Kicks, APolishedPlanNeverTakesLessThanItsComputeOps) {
  int num_polished = 0, num_hopeless = 0;
  for_each_dp_plan(11, 60, [&](const Chain& chain, int64_t budget, const std::vector<Op>& dp) {
    const std::vector<Op> polished = polish_copies(chain, budget, dp);
    const double polished_ms = simulate_timeline(chain, polished).time_ms;
    // Each kept stage checkpointed and re-run with autograd just before its backward.
    std::vector<std::vector<Op>> starts = {dp};
    const auto loss = std::find(polished.begin(), polished.end(), Op{OpKind::Loss, -1});
    for (auto op = polished.begin(); op < loss; ++op) {
      if (op->kind != OpKind::FwdKeep) continue;
      const auto bwd = std::find(op + 1, polished.end(), Op{OpKind::Bwd, op->index});
      std::vector<Op> kicked(polished.begin(), polished.end());
      kicked[op - polished.begin()].kind = OpKind::FwdCkpt;
      kicked.insert(kicked.begin() + (bwd - polished.begin()), *op);
      if (simulate_timeline(chain, kicked).valid) starts.push_back(std::move(kicked));
    }
    for (const std::vector<Op>& start : starts) {
      const double compute_ms = compute_only_ms(chain, start);
      const SimResult r = simulate_timeline(chain, polish_copies(chain, budget, start));
      ASSERT_TRUE(r.valid) << r.error;
      EXPECT_GE(r.time_ms, compute_ms * (1 - 1e-12));
      ++num_polished;
      num_hopeless += compute_ms > polished_ms;
    }
  });
  EXPECT_GT(num_polished, 200);
  EXPECT_GT(num_hopeless, 20);
}

}  // namespace
}  // namespace memopt::solver

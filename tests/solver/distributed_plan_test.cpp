// distributed_plan_test.cpp: the pipeline cut against brute force over every cut,
// sub-chains, batch scaling, and ZeRO's per-rank bytes against their closed forms.
#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "solver/distributed/distributed_plan.h"
#include "solver/distributed/pipeline_partition.h"
#include "solver/distributed/zero_memory.h"

namespace memopt::solver {
namespace {

double largest_part(const std::vector<double>& cost, const std::vector<int>& cuts) {
  std::vector<int> b = cuts;
  b.insert(b.begin(), 0);
  b.push_back(static_cast<int>(cost.size()));
  double worst = 0;
  for (size_t k = 0; k + 1 < b.size(); ++k) {
    double s = 0;
    for (int i = b[k]; i < b[k + 1]; ++i) s += cost[i];
    worst = std::max(worst, s);
  }
  return worst;
}

// Every strictly increasing choice of parts-1 cut points in 1..n-1 (only where
// `cuttable` allows, when given).
double brute_force_best(const std::vector<double>& cost, int parts, const std::vector<bool>& cuttable = {}) {
  const int n = static_cast<int>(cost.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> cuts;
  std::function<void(int)> rec = [&](int from) {
    if (static_cast<int>(cuts.size()) == parts - 1) {
      best = std::min(best, largest_part(cost, cuts));
      return;
    }
    for (int c = from; c <= n - (parts - 1 - static_cast<int>(cuts.size())); ++c) {
      if (!cuttable.empty() && !cuttable[c]) continue;
      cuts.push_back(c);
      rec(c + 1);
      cuts.pop_back();
    }
  };
  rec(1);
  return best;
}

TEST(PipelineCuts, OptimalAgainstBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 10.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    std::vector<double> cost(n);
    for (double& c : cost) c = (rng() % 4 == 0) ? 0.0 : u(rng);
    for (int parts = 1; parts <= n; ++parts) {
      const std::vector<int> cuts = balanced_cuts(cost, parts);
      ASSERT_EQ(static_cast<int>(cuts.size()), parts - 1);
      ASSERT_TRUE(std::is_sorted(cuts.begin(), cuts.end()));
      for (size_t i = 0; i < cuts.size(); ++i) {
        ASSERT_GE(cuts[i], i == 0 ? 1 : cuts[i - 1] + 1);  // non-empty parts
        ASSERT_LE(cuts[i], n - 1);
      }
      // Exact: the same floating-point sums in the same order.
      EXPECT_DOUBLE_EQ(largest_part(cost, cuts), brute_force_best(cost, parts)) << "n=" << n << " parts=" << parts;
    }
  }
}

// Cuts only where allowed (operator stages: between blocks): still the best such cut,
// and an error, not a bad cut, when too few places are allowed.
TEST(PipelineCuts, OnlyWhereCuttableAndOptimalThere) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(0.1, 10.0);
  int num_refused = 0, num_cut = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    std::vector<double> cost(n);
    for (double& c : cost) c = u(rng);
    std::vector<bool> cuttable(n);
    for (int i = 0; i < n; ++i) cuttable[i] = rng() % 2 == 0;
    for (int parts = 1; parts <= n; ++parts) {
      const double best = brute_force_best(cost, parts, cuttable);
      if (best == std::numeric_limits<double>::infinity()) {
        EXPECT_THROW(balanced_cuts(cost, parts, cuttable), std::invalid_argument);
        ++num_refused;
        continue;
      }
      const std::vector<int> cuts = balanced_cuts(cost, parts, cuttable);
      for (const int c : cuts) EXPECT_TRUE(cuttable[c]) << "cut at " << c;
      EXPECT_DOUBLE_EQ(largest_part(cost, cuts), best) << "n=" << n << " parts=" << parts;
      ++num_cut;
    }
  }
  EXPECT_GT(num_refused, 50);
  EXPECT_GT(num_cut, 300);
}

TEST(PipelineCuts, RejectsMorePartsThanStages) {
  EXPECT_THROW(balanced_cuts({1.0, 2.0}, 3), std::invalid_argument);
  EXPECT_THROW(balanced_cuts({1.0}, 0), std::invalid_argument);
}

Chain gpt2_like_chain() {
  // embed (wte 1000 + wpe 100 floats), two blocks, head reading the tied wte.
  Chain c;
  c.input_bytes = 64;
  c.stages = {{"embed", 1, 2, 400, 400, 0, 40}, {"h.0", 3, 6, 400, 1200, 80, 120},
              {"h.1", 3, 6, 400, 1200, 80, 120}, {"head", 2, 3, 4, 800, 400, 400}};
  c.stages[0].param_bytes = 4 * 1100;
  c.stages[1].param_bytes = 4 * 301;
  c.stages[2].param_bytes = 4 * 301;
  c.stages[3].param_bytes = 4 * 2;
  c.stages[3].param_reads = {{0, 4 * 1000}};
  return c;
}

TEST(ZeroMemory, ClosedFormsPerStage) {
  const ZeroBuckets z = zero_buckets(gpt2_like_chain(), "test");
  ASSERT_EQ(z.numel, (std::vector<int64_t>{1100, 301, 301, 2}));
  ASSERT_EQ(z.reads[3], (std::vector<int>{3, 0}));
  const int D = 4;
  // P_b = ceil(n_b/4)*4: 1100, 304, 304, 4 -> sum 1712; S_b: 275, 76, 76, 1 -> 428.
  const int64_t P = 1712, S = 428;
  const ZeroMemory m0 = zero_memory(z, D, 0), m1 = zero_memory(z, D, 1), m2 = zero_memory(z, D, 2),
                   m3 = zero_memory(z, D, 3);
  EXPECT_EQ(m0.persistent_bytes(), 4 * (P + P + 2 * P));
  EXPECT_EQ(m1.persistent_bytes(), 4 * (P + P + 2 * S));
  EXPECT_EQ(m2.persistent_bytes(), 4 * (P + S + 2 * S));
  EXPECT_EQ(m3.persistent_bytes(), 4 * (S + S + 2 * S));
  // Stage 3 gathers the head's own bucket and embed's (for wte) at once: 4 + 1100.
  EXPECT_GE(m3.transient_bytes, 4 * (1100 + 4));
  // Stage 2, backward of the head then the blocks: wte's bucket stays whole from the
  // head's backward down to embed's (h.0's reduce-scatter: 1100 + 304 alive, its flat
  // copy 304 and output 76 = 1784); the largest moment is embed's own reduce-scatter:
  // its 1100 gradients, their flat copy 1100 and the 275 it keeps.
  EXPECT_EQ(m2.transient_bytes, 4 * (1100 + 1100 + 275));
  // Each stage keeps strictly less than the one before.
  EXPECT_GT(m0.persistent_bytes(), m1.persistent_bytes());
  EXPECT_GT(m1.persistent_bytes(), m2.persistent_bytes());
  EXPECT_GT(m2.persistent_bytes(), m3.persistent_bytes());
}

TEST(ZeroMemory, OldProfilesNameTheFix) {
  Chain c = gpt2_like_chain();
  c.stages[2].param_bytes.reset();
  try {
    zero_buckets(c, "old.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("old.json: /stages/2/param_bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("memopt profile"), std::string::npos);
  }
}

TEST(SubChain, RehomesTiedParametersAndFreesTheLoss) {
  const Chain c = gpt2_like_chain();
  const Chain tail = sub_chain(c, 2, 4);
  EXPECT_EQ(tail.input_bytes, c.x(2));
  ASSERT_EQ(tail.length(), 2);
  // The head reads wte, whose home (embed) is on another pipeline stage: here it is
  // the head's own.
  EXPECT_EQ(*tail.stages[1].param_bytes, 4 * (2 + 1000));
  EXPECT_TRUE(tail.stages[1].param_reads.empty());
  const Chain head_first = sub_chain(c, 0, 2);
  EXPECT_EQ(head_first.loss.bwd_ms, 0);
  EXPECT_EQ(*head_first.stages[0].param_bytes, 4 * 1100);
}

TEST(ScaleBatch, BytesScaleExactlyTimesLinearly) {
  const Chain c = gpt2_like_chain();
  const Chain q = scale_batch(c, 1, 4);
  EXPECT_EQ(q.input_bytes, 16);
  EXPECT_EQ(q.stages[1].saved_bytes, 300);
  EXPECT_DOUBLE_EQ(q.stages[1].fwd_ms, 0.75);
  EXPECT_EQ(q.stages[3].out_bytes, 1);
}

TEST(DistributedPlan, BudgetPerMicroBatchFollowsInFlightCount) {
  const Chain c = gpt2_like_chain();
  SolveOptions o;
  o.solver = SolverKind::RecomputeOnly;
  const auto plans = plan_distributed(c, {2, 1, 2, 4, 4}, 100000, o, "test");
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].in_flight, 2);  // P - k = 2 of the 4 micro-batches
  EXPECT_EQ(plans[1].in_flight, 1);
  for (const auto& p : plans) {
    EXPECT_EQ(p.activation_budget_bytes, 100000 - p.zero.static_bytes());
    EXPECT_EQ(p.micro_batch_budget_bytes, p.activation_budget_bytes / p.in_flight);
    EXPECT_LE(p.schedule.predicted.peak_bytes, p.micro_batch_budget_bytes);
  }
  EXPECT_THROW(plan_distributed(c, {3, 1, 2, 4, 4}, 100000, o, "test"), std::invalid_argument);
  EXPECT_THROW(plan_distributed(c, {2, 1, 1, 3, 4}, 100000, o, "test"), std::invalid_argument);
  EXPECT_THROW(plan_distributed(c, {1, 0, 1, 1, 4}, 100, o, "test"), std::invalid_argument);
}

TEST(DistributedPlan, MicroBatchRowsAndStageFiles) {
  DistributedLayout l;
  l.world_size = 8;
  l.pipeline_stages = 2;
  l.micro_batches = 4;
  l.batch_rows = 32;
  EXPECT_EQ(data_parallel_ranks(l), 4);
  EXPECT_EQ(micro_batch_rows(l), 2);  // 32 rows over 4 ranks x 4 micro-batches
  EXPECT_EQ(stage_schedule_path("out/S.json", 0, 1), "out/S.json");
  EXPECT_EQ(stage_schedule_path("out/S.json", 0, 2), "out/S.stage0.json");
  EXPECT_EQ(stage_schedule_path("out/S.json", 1, 2), "out/S.stage1.json");
  EXPECT_EQ(stage_schedule_path("plan", 3, 4), "plan.stage3.json");
}

TEST(DistributedPlan, LayoutErrorsNameTheQuantityNotAFlag) {
  const Chain c = gpt2_like_chain();
  const SolveOptions o;
  const auto message = [&](const DistributedLayout& l, int64_t device_bytes) -> std::string {
    try {
      plan_distributed(c, l, device_bytes, o, "test");
    } catch (const LayoutError& e) {
      return e.what();
    }
    return "no LayoutError";
  };
  EXPECT_EQ(message({0, 0, 1, 1, 4}, 100000), "the world size must be at least 1 rank (got 0)");
  EXPECT_EQ(message({3, 0, 2, 1, 4}, 100000), "the number of pipeline stages (2) must divide the world size (3 ranks)");
  EXPECT_EQ(message({2, 0, 1, 0, 4}, 100000), "the number of micro-batches must be at least 1 (got 0)");
  const std::string no_room = message({1, 0, 1, 1, 4}, 100);
  EXPECT_TRUE(no_room.starts_with("pipeline stage 0: ZeRO-0 leaves ")) << no_room;
  EXPECT_TRUE(no_room.ends_with("raise the ZeRO stage, the world size or the number of pipeline stages")) << no_room;
  const ZeroBuckets z = zero_buckets(c, "test");
  EXPECT_THROW(zero_memory(z, 0, 0), std::invalid_argument);
  try {
    zero_memory(z, 2, 4);
    FAIL() << "accepted ZeRO stage 4";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "the ZeRO stage must be 0, 1, 2 or 3 (got 4)");
  }
}

}  // namespace
}  // namespace memopt::solver

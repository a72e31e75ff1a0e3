// baselines_test.cpp: the baselines of docs/formats.md, "Baselines and the solver front door" --
// valid on any chain, their
// closed forms on homogeneous chains, sqrt's segment count, recompute_all's minimal
// peak, and the budgeted variants' cut-off exactly at the simulated peak.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "solver/dp/baselines.h"
#include "solver/chain/chain.h"
#include "solver/chain/simulate.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

struct Baseline {
  const char* name;
  std::function<std::vector<Op>(const Chain&)> ops;
  std::function<std::optional<std::vector<Op>>(const Chain&, int64_t, const DpOptions&)> budgeted;
};

const Baseline kBaselines[] = {
    {"store_all", store_all_ops, store_all},
    {"sqrt", sqrt_ops, sqrt_segments},
    {"recompute_blocks", recompute_blocks_ops, recompute_blocks},
    {"recompute_all", recompute_all_ops, recompute_all},
};

// Holds d_0 and nothing else at the end: checked here by replaying the ops' effects
// on a set of names (independently of the simulator's own end check).
bool ends_with_only_d0(const Chain& chain, const std::vector<Op>& ops) {
  const int L = chain.length();
  std::vector<int> plain(L + 2, 0), saved(L + 2, 0), grad(L + 2, 0);
  plain[0] = 1;
  for (const Op& op : ops) {
    const int i = op.index;
    switch (op.kind) {
      case OpKind::FwdKeep: saved[i + 1] = 1; break;
      case OpKind::FwdCkpt: plain[i + 1] = 1; break;
      case OpKind::FwdDrop: plain[i + 1] = 1; plain[i] = 0; break;
      case OpKind::Loss: grad[L] = 1; plain[L] = 0; break;
      case OpKind::Bwd: grad[i] = 1; grad[i + 1] = 0; saved[i + 1] = 0; plain[i] = 0; break;
      default: return false;
    }
  }
  int num_left = 0;
  for (int k = 0; k <= L + 1; ++k) num_left += plain[k] + saved[k] + grad[k];
  return num_left == 1 && grad[0] == 1;
}

TEST(Baselines, ValidOnRandomChainsAndEndHoldingOnlyD0) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 1000; ++trial) {
    testing::RandomChainOptions o;
    o.length = 1 + trial % 30;
    o.unit_bytes = 1 + static_cast<int64_t>(rng() % 100000);
    o.integer_ms = false;
    const Chain chain = testing::random_chain(rng, o);
    for (const Baseline& b : kBaselines) {
      const std::vector<Op> ops = b.ops(chain);
      const SimResult seq = simulate_sequential(chain, ops);
      ASSERT_TRUE(seq.valid) << b.name << ", L=" << o.length << ": " << seq.error;
      EXPECT_TRUE(ends_with_only_d0(chain, ops)) << b.name;
      const SimResult tl = simulate_timeline(chain, ops);
      ASSERT_TRUE(tl.valid) << b.name << ": " << tl.error;
      EXPECT_EQ(tl.peak_bytes, seq.peak_bytes) << b.name;
      EXPECT_EQ(tl.time_ms, seq.time_ms) << b.name;
      // Every stage runs backward exactly once.
      int num_bwd = 0;
      for (const Op& op : ops) num_bwd += op.kind == OpKind::Bwd;
      EXPECT_EQ(num_bwd, o.length) << b.name;
    }
  }
}

TEST(Baselines, ClosedFormsOnHomogeneousChains) {
  // docs/formats.md, "Baselines" lists all three closed forms. recompute_all's follow from
  // its ops (derived here): a forward pass of L stages, then before bwd t a recompute
  // of stages 0..t, so (L + L(L+1)/2)·uf + L·ub; its peak is at bwd t >= 1 holding
  // a_0, a_t, ā_{t+1}, d_{t+1}, d_t: 4c + c̄ (for L = 1, bwd 0 holds a_0 once: 3c + c̄).
  const double uf = 0.75, ub = 1.5;  // dyadic: the sums are exact
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1}, {2, 9}, {4096, 4096 * 10}, {1000003, 2000011}};
  for (int L = 1; L <= 48; ++L) {
    for (const auto& [c, cbar] : sizes) {
      SCOPED_TRACE("L=" + std::to_string(L) + ", c=" + std::to_string(c) + ", cbar=" + std::to_string(cbar));
      const Chain chain = testing::homogeneous_chain(L, uf, ub, c, cbar);
      const SimResult sa = simulate_sequential(chain, store_all_ops(chain));
      ASSERT_TRUE(sa.valid) << sa.error;
      EXPECT_EQ(sa.time_ms, L * (uf + ub));
      EXPECT_EQ(sa.peak_bytes, L * cbar + 3 * c);
      const SimResult rb = simulate_sequential(chain, recompute_blocks_ops(chain));
      ASSERT_TRUE(rb.valid) << rb.error;
      EXPECT_EQ(rb.time_ms, (2 * L - 1) * uf + L * ub);
      EXPECT_EQ(rb.peak_bytes, (L + 2) * c + cbar);
      const SimResult ra = simulate_sequential(chain, recompute_all_ops(chain));
      ASSERT_TRUE(ra.valid) << ra.error;
      EXPECT_EQ(ra.time_ms, (L + L * (L + 1) / 2) * uf + L * ub);
      EXPECT_EQ(ra.peak_bytes, (L == 1 ? 3 : 4) * c + cbar);
    }
  }
}

// The number of segments of sqrt's schedule: the checkpoints taken before the loss,
// plus the last segment, which is kept whole.
int num_segments(const std::vector<Op>& ops) {
  int n = 1;
  for (const Op& op : ops) {
    if (op.kind == OpKind::Loss) break;
    n += op.kind == OpKind::FwdCkpt;
  }
  return n;
}

TEST(Baselines, SqrtUsesAboutSqrtLSegments) {
  for (int L = 1; L <= 200; ++L) {
    const Chain chain = testing::homogeneous_chain(L, 1.0, 2.0, 10, 40);
    const std::vector<Op> ops = sqrt_ops(chain);
    const int segments = num_segments(ops);
    // Segments of round(√L) stages: ceil(L / round(√L)) segments, within 1 of √L.
    EXPECT_LE(std::abs(segments - std::sqrt(static_cast<double>(L))), 1.0) << "L=" << L << ": " << segments;
    // Each stage runs forward at most twice (once more inside its segment's backward).
    std::vector<int> forwards(L, 0);
    for (const Op& op : ops) {
      if (op.kind == OpKind::FwdKeep || op.kind == OpKind::FwdCkpt || op.kind == OpKind::FwdDrop) ++forwards[op.index];
    }
    for (int i = 0; i < L; ++i) EXPECT_LE(forwards[i], 2) << "L=" << L << ", stage " << i;
    // Between recompute_blocks and store_all in time.
    const double t = simulate_sequential(chain, ops).time_ms;
    EXPECT_LE(t, simulate_sequential(chain, recompute_blocks_ops(chain)).time_ms);
    EXPECT_GE(t, simulate_sequential(chain, store_all_ops(chain)).time_ms);
  }
}

TEST(Baselines, RecomputeAllHasTheSmallestPeakOnHomogeneousChains) {
  for (int L = 1; L <= 40; ++L) {
    for (const auto& [c, cbar] : {std::pair<int64_t, int64_t>{10, 10}, {10, 35}, {10, 200}}) {
      const Chain chain = testing::homogeneous_chain(L, 1.0, 2.0, c, cbar);
      const int64_t ra = simulate_sequential(chain, recompute_all_ops(chain)).peak_bytes;
      for (const Baseline& b : kBaselines) {
        EXPECT_LE(ra, simulate_sequential(chain, b.ops(chain)).peak_bytes) << b.name << ", L=" << L;
      }
    }
  }
}

TEST(Baselines, BudgetedVariantsCutOffAtTheirPeak) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 300; ++trial) {
    testing::RandomChainOptions o;
    o.length = 1 + trial % 20;
    o.unit_bytes = 1 + static_cast<int64_t>(rng() % 5000);
    o.integer_ms = false;
    const Chain chain = testing::random_chain(rng, o);
    for (const Baseline& b : kBaselines) {
      const std::vector<Op> ops = b.ops(chain);
      const int64_t peak = simulate_sequential(chain, ops).peak_bytes;
      for (const int slots : {50, 500}) {
        DpOptions opts;
        opts.slots = slots;  // baselines simulate in bytes: slots must not matter
        EXPECT_FALSE(b.budgeted(chain, peak - 1, opts).has_value()) << b.name;
        const auto at = b.budgeted(chain, peak, opts);
        ASSERT_TRUE(at.has_value()) << b.name;
        EXPECT_EQ(*at, ops) << b.name;
        const auto above = b.budgeted(chain, 3 * peak + 1, opts);
        ASSERT_TRUE(above.has_value()) << b.name;
        EXPECT_EQ(*above, ops) << b.name;
      }
    }
  }
}

// selective and pointwise: each stage of their role runs forward twice -- once
// without autograd on the way up, once under autograd right before its backward --
// and every other stage once, under autograd; a run of such stages is recomputed
// from its first stage's input alone; chains without the role get no plan.
TEST(Baselines, SelectiveAndPointwiseRecomputeExactlyTheStagesOfTheirRole) {
  const auto op = [](OpKind k, int i) { return Op{k, i}; };
  Chain chain = testing::homogeneous_chain(4, 1.0, 2.0, 100, 400);
  EXPECT_FALSE(selective_ops(chain).has_value());
  EXPECT_FALSE(pointwise_ops(chain).has_value());
  EXPECT_FALSE(selective(chain, int64_t{1} << 40).has_value());
  chain.stages[1].role = StageRole::AttentionCore;
  chain.stages[3].role = StageRole::Pointwise;
  const std::vector<Op> expected_selective = {
      op(OpKind::FwdKeep, 0), op(OpKind::FwdCkpt, 1), op(OpKind::FwdKeep, 2), op(OpKind::FwdKeep, 3),
      op(OpKind::Loss, -1),   op(OpKind::Bwd, 3),     op(OpKind::Bwd, 2),     op(OpKind::FwdKeep, 1),
      op(OpKind::Bwd, 1),     op(OpKind::Bwd, 0)};
  EXPECT_EQ(*selective_ops(chain), expected_selective);
  const std::vector<Op> expected_pointwise = {
      op(OpKind::FwdKeep, 0), op(OpKind::FwdKeep, 1), op(OpKind::FwdKeep, 2), op(OpKind::FwdCkpt, 3),
      op(OpKind::Loss, -1),   op(OpKind::FwdKeep, 3), op(OpKind::Bwd, 3),     op(OpKind::Bwd, 2),
      op(OpKind::Bwd, 1),     op(OpKind::Bwd, 0)};
  EXPECT_EQ(*pointwise_ops(chain), expected_pointwise);
  // A run of two (an attention core cut in two) is recomputed together from its input.
  chain.stages[2].role = StageRole::AttentionCore;
  const std::vector<Op> expected_run = {
      op(OpKind::FwdKeep, 0), op(OpKind::FwdCkpt, 1), op(OpKind::FwdDrop, 2), op(OpKind::FwdKeep, 3),
      op(OpKind::Loss, -1),   op(OpKind::Bwd, 3),     op(OpKind::FwdKeep, 1), op(OpKind::FwdKeep, 2),
      op(OpKind::Bwd, 2),     op(OpKind::Bwd, 1),     op(OpKind::Bwd, 0)};
  EXPECT_EQ(*selective_ops(chain), expected_run);
  // On random chains with random roles: the forward counts, validity, and the
  // budgeted variant's cut-off at the simulated peak.
  std::mt19937_64 rng(318);
  for (int trial = 0; trial < 300; ++trial) {
    testing::RandomChainOptions o;
    o.length = 1 + trial % 12;
    o.carry_probability = 0.5;
    Chain c = testing::random_chain(rng, o);
    for (Stage& st : c.stages) st.role = kStageRoles[rng() % std::size(kStageRoles)].value;
    for (const StageRole role : {StageRole::AttentionCore, StageRole::Pointwise}) {
      const auto ops = role == StageRole::AttentionCore ? selective_ops(c) : pointwise_ops(c);
      bool any = false;  // counted here, not with Chain::has_role, which the baseline uses
      for (const Stage& st : c.stages) any = any || st.role == role;
      ASSERT_EQ(ops.has_value(), any);
      if (!ops) continue;
      std::vector<int> forwards(c.stages.size(), 0), kept(c.stages.size(), 0), checkpointed(c.stages.size(), 0);
      for (const Op& p : *ops) {
        if (p.kind == OpKind::FwdKeep || p.kind == OpKind::FwdCkpt || p.kind == OpKind::FwdDrop) ++forwards[p.index];
        if (p.kind == OpKind::FwdKeep) ++kept[p.index];
        if (p.kind == OpKind::FwdCkpt) ++checkpointed[p.index];
      }
      for (size_t i = 0; i < c.stages.size(); ++i) {
        const bool recomputed = c.stages[i].role == role;
        const bool run_start = recomputed && (i == 0 || c.stages[i - 1].role != role);
        EXPECT_EQ(forwards[i], recomputed ? 2 : 1) << "stage " << i;
        EXPECT_EQ(kept[i], 1) << "stage " << i;
        EXPECT_EQ(checkpointed[i], run_start ? 1 : 0) << "stage " << i;  // only a run's input is stored
      }
      const SimResult sim = simulate_sequential(c, *ops);
      ASSERT_TRUE(sim.valid) << sim.error;
      EXPECT_TRUE(ends_with_only_d0(c, *ops));
      const auto fn = role == StageRole::AttentionCore ? selective : pointwise;
      EXPECT_TRUE(fn(c, sim.peak_bytes, {}).has_value());
      EXPECT_FALSE(fn(c, sim.peak_bytes - 1, {}).has_value());
    }
  }
}

}  // namespace
}  // namespace memopt::solver

// coarsen_test.cpp: the chain of blocks holds and takes what its stages hold and take,
// checked against the simulator on the stages for every persistent schedule of the
// blocks; block plans with copies write out to valid plans; `optimal` uses them.
#include "solver/chain/coarsen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/dp/offload.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "tests/solver/brute_force.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

TEST(Coarsen, ABlockIsTheNameUpToItsFirstNumber) {
  EXPECT_EQ(block_of("h.3.attn.c_attn"), "h.3");
  EXPECT_EQ(block_of("h.11.ln_1"), "h.11");
  EXPECT_EQ(block_of("model.layers.7.mlp.act"), "model.layers.7");
  EXPECT_EQ(block_of("7.x"), "7");
  // A name without a number before its last component is a stage of its own.
  EXPECT_EQ(block_of("h.3"), "");
  EXPECT_EQ(block_of("embed"), "");
  EXPECT_EQ(block_of("head.ln_f"), "");
  EXPECT_EQ(block_of("h3.ln_1"), "");
  EXPECT_EQ(block_of("h.3b.ln_1"), "");
  EXPECT_EQ(block_of(""), "");
  EXPECT_EQ(block_of("h..ln"), "");
}

// Random stages in random groups, with carried bytes; unless `across_blocks`, only
// inside a group: the last stage of each group makes an output all its own, as a
// residual add does.
struct Grouped {
  Chain fine;
  std::vector<int> first;
};
Grouped grouped_chain(std::mt19937_64& rng, int blocks, bool across_blocks = false) {
  std::uniform_int_distribution<int> size(1, 3);
  std::vector<int> first{0};
  for (int g = 0; g < blocks; ++g) first.push_back(first.back() + size(rng));
  testing::RandomChainOptions o;
  o.length = first.back();
  o.max_units = 6;
  o.large_tmp_units = 20;
  o.carry_probability = 0.7;
  o.below_gradient_probability = 0.2;
  o.pair_time_probability = 0.5;  // a block back to back runs only its last stage so
  Grouped c{testing::random_chain(rng, o), first};
  for (size_t g = 1; g < first.size() && !across_blocks; ++g)
    c.fine.stages[static_cast<size_t>(first[g] - 1)].carried_bytes = 0;
  return c;
}

bool drops_a_block_of_several(const Coarsening& c, const std::vector<Op>& ops) {
  for (const Op& op : ops)
    if (op.kind == OpKind::FwdDrop && c.first[op.index + 1] - c.first[op.index] > 1) return true;
  return false;
}

// The block chain's numbers are derived, not measured; the simulator on the stages is
// the reference. Every persistent schedule of the blocks, written out, is valid on the
// stages and takes the same time; its peak is the same, but where it drops a block of
// several stages, whose forward the block chain counts as holding its input to the end
// (Note [Plans made for the blocks] in coarsen.h): there it is never above.
TEST(Coarsen, EveryScheduleOfTheBlocksHasTheSamePeakAndTimeOnTheStages) {
  std::mt19937_64 rng(20261127);
  int exact = 0, below = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int blocks = 1 + trial % 4;
    const Grouped g = grouped_chain(rng, blocks, /*across_blocks=*/trial % 2 == 1);
    ASSERT_EQ(validate(g.fine), "") << "trial " << trial;
    const Coarsening c = coarsen(g.fine, g.first);
    ASSERT_EQ(validate(c.chain), "") << "trial " << trial;
    for (const std::vector<Op>& ops : testing::all_persistent_schedules(blocks)) {
      const SimResult coarse = simulate_sequential(c.chain, ops);
      const SimResult fine = simulate_sequential(g.fine, write_out(g.fine, c, ops));
      ASSERT_TRUE(coarse.valid) << coarse.error;
      ASSERT_TRUE(fine.valid) << "trial " << trial << ": " << fine.error;
      ASSERT_NEAR(fine.time_ms, coarse.time_ms, 1e-9 * (1 + coarse.time_ms)) << "trial " << trial;
      if (drops_a_block_of_several(c, ops)) {
        ASSERT_LE(fine.peak_bytes, coarse.peak_bytes) << "trial " << trial;
        below += fine.peak_bytes < coarse.peak_bytes;
      } else {
        ASSERT_EQ(fine.peak_bytes, coarse.peak_bytes) << "trial " << trial;
        ++exact;
      }
    }
  }
  EXPECT_GT(exact, 1000);
  EXPECT_GT(below, 0);  // the over-count is real, and the test sees it
}

TEST(Coarsen, ABlockOfOneStageIsThatStage) {
  std::mt19937_64 rng(7);
  const Grouped g = grouped_chain(rng, 3);
  std::vector<int> singles;
  for (int k = 0; k <= g.fine.length(); ++k) singles.push_back(k);
  const Coarsening c = coarsen(g.fine, singles);
  for (int k = 0; k < g.fine.length(); ++k) {
    EXPECT_EQ(c.chain.stages[k].saved_bytes, g.fine.stages[k].saved_bytes);
    EXPECT_EQ(c.chain.stages[k].fwd_tmp_bytes, g.fine.stages[k].fwd_tmp_bytes);
  }
  const std::vector<Op> ops = store_all(g.fine, int64_t{1} << 40, {}).value();
  EXPECT_EQ(write_out(g.fine, c, ops), ops);
}

TEST(Coarsen, RefusesGroupsThatDoNotCoverTheChain) {
  std::mt19937_64 rng(3);
  const Grouped g = grouped_chain(rng, 2);
  EXPECT_THROW(coarsen(g.fine, {0, g.fine.length() - 1}), std::invalid_argument);
  EXPECT_THROW(coarsen(g.fine, {1, g.fine.length()}), std::invalid_argument);
  EXPECT_THROW(coarsen(g.fine, {0, 0, g.fine.length()}), std::invalid_argument);
}

Chain named(const Grouped& g) {
  Chain named = g.fine;
  for (size_t b = 0; b + 1 < g.first.size(); ++b)
    for (int k = g.first[b]; k < g.first[b + 1]; ++k)
      named.stages[static_cast<size_t>(k)].name = "h." + std::to_string(b) + ".op" + std::to_string(k);
  return named;
}

TEST(Coarsen, GroupsByName) {
  std::mt19937_64 rng(11);
  Grouped g = grouped_chain(rng, 4);
  while (g.first.size() == static_cast<size_t>(g.fine.length()) + 1) g = grouped_chain(rng, 4);
  const std::optional<Coarsening> c = coarsen_to_blocks(named(g));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->first, g.first);
  EXPECT_EQ(c->chain.stages[0].name, g.first[1] > 1 ? "h.0" : "h.0.op0");
  EXPECT_FALSE(coarsen_to_blocks(g.fine).has_value());  // "s0", "s1", ...: no blocks
  EXPECT_FALSE(coarsen_to_blocks(c->chain).has_value());  // blocks of blocks: none
}

// Note [Block boundaries]: where the stages carry `block` fields, they decide, whatever
// the names say; a chain without any field is grouped by name as before.
TEST(Coarsen, GroupsByTheBlockFieldWhereTheProfileHasOne) {
  std::mt19937_64 rng(12);
  Grouped g = grouped_chain(rng, 4);
  while (g.first.size() == static_cast<size_t>(g.fine.length()) + 1) g = grouped_chain(rng, 4);
  Chain fields = g.fine;  // names "s0", "s1", ...: no block by name
  for (size_t b = 0; b + 1 < g.first.size(); ++b)
    for (int k = g.first[b]; k < g.first[b + 1]; ++k)
      if (g.first[b + 1] - g.first[b] > 1) fields.stages[static_cast<size_t>(k)].block = "layer " + std::to_string(b);
  const std::optional<Coarsening> c = coarsen_to_blocks(fields);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->first, g.first);
  const int first_block = g.first[1] > 1 ? 0 : -1;
  if (first_block == 0) {
    EXPECT_EQ(c->chain.stages[0].name, "layer 0");
  }
  // Fields that put no two stages together win over names that would.
  Chain singles = named(g);
  for (int k = 0; k < singles.length(); ++k) singles.stages[static_cast<size_t>(k)].block = "b" + std::to_string(k);
  EXPECT_FALSE(coarsen_to_blocks(singles).has_value());
  const std::vector<std::string_view> single_blocks = stage_blocks(singles);
  for (int k = 0; k < singles.length(); ++k) EXPECT_EQ(single_blocks[k], "b" + std::to_string(k));
  // Without any field, the names decide.
  const Chain by_name = named(g);
  const std::vector<std::string_view> name_blocks = stage_blocks(by_name);
  for (int k = 0; k < by_name.length(); ++k)
    EXPECT_EQ(name_blocks[k], block_of(by_name.stages[static_cast<size_t>(k)].name));
}

// Block plans with copies, from the offload DP on the blocks at budgets across their
// range, write out to plans the timeline simulator accepts on the stages. Where no
// bytes are carried across blocks, the stages' copies (own bytes, ending carries,
// saved states: Note [Carried bytes may leave] in simulate.h) move at least what the
// block's do, so the written-out plan peaks no higher than the block plan.
TEST(Coarsen, BlockPlansWithCopiesWriteOutToValidPlans) {
  std::mt19937_64 rng(5);
  int with_copies = 0, with_carried = 0, compared = 0, below = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const bool across_blocks = trial % 2 == 1;
    Grouped g = grouped_chain(rng, 2 + trial % 3, across_blocks);
    g.fine.link = Link{1000.0, 1000.0};
    const Coarsening c = coarsen(g.fine, g.first);
    Chain blocks = c.chain;
    blocks.link = g.fine.link;
    const int64_t peak = store_all_peak_bytes(c.chain);
    for (int eighths = 2; eighths <= 8; eighths += 2) {
      const std::optional<std::vector<Op>> plan = solve_offload(c.chain, peak * eighths / 8, {});
      if (!plan) continue;
      const std::vector<Op> ops = write_out(g.fine, c, *plan);
      const SimResult r = simulate_timeline(g.fine, ops);
      ASSERT_TRUE(r.valid) << "trial " << trial << ": " << r.error;
      with_copies += r.copy_ms > 0;
      with_carried += std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.kind == OpKind::OffloadCarried; });
      if (across_blocks || drops_a_block_of_several(c, *plan)) continue;
      const SimResult b = simulate_timeline(blocks, *plan);
      ASSERT_TRUE(b.valid) << b.error;
      EXPECT_LE(r.peak_bytes, b.peak_bytes) << "trial " << trial << ", " << eighths << "/8";
      ++compared;
      below += r.peak_bytes < b.peak_bytes;
    }
  }
  EXPECT_GT(with_copies, 20);
  EXPECT_GT(with_carried, 10);
  EXPECT_GT(compared, 100);
  std::printf("written-out block plans: %d compared, %d below the block plan's peak\n", compared, below);
}

// `optimal` on named stages takes the written-out block plan where it is faster than
// what its own search finds: never slower than it where it fits, and on these chains
// sometimes faster than the same stages without names.
TEST(Coarsen, OptimalOnNamedStagesIsNeverSlowerThanTheBlocksPlanWrittenOut) {
  std::mt19937_64 rng(13);
  int faster = 0, compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Grouped g = grouped_chain(rng, 3 + trial % 2);
    g.fine.link = Link{500.0, 500.0};
    const Chain stages = named(g);
    const Coarsening c = coarsen(g.fine, g.first);
    const int64_t peak = store_all_peak_bytes(g.fine);
    for (int eighths = 3; eighths <= 7; eighths += 2) {
      SolveOptions o;
      o.budget_bytes = peak * eighths / 8;
      o.find_min_budget = false;
      o.slots = 200;
      Schedule blocks, with_names, without_names;
      try {
        blocks = solve(c.chain, o);
        with_names = solve(stages, o);
        without_names = solve(g.fine, o);
      } catch (const InfeasibleBudget&) {
        continue;
      }
      const SimResult written = simulate_timeline(g.fine, write_out(g.fine, c, blocks.ops));
      ASSERT_TRUE(written.valid) << written.error;
      if (!fits(written, o.budget_bytes)) continue;
      ++compared;
      EXPECT_LE(with_names.predicted.time_ms, written.time_ms + 1e-9) << "trial " << trial;
      EXPECT_LE(with_names.predicted.time_ms, without_names.predicted.time_ms + 1e-9) << "trial " << trial;
      faster += with_names.predicted.time_ms < without_names.predicted.time_ms - 1e-9;
    }
  }
  EXPECT_GT(compared, 30);
  EXPECT_GT(faster, 0);
}

}  // namespace
}  // namespace memopt::solver

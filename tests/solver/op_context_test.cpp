// op_context_test.cpp: Note [Where an op runs] -- each compute op's context, on a
// hand-written plan and, in closed form, on the baselines' plans.
//   ctest --test-dir build -R 'OpContext'
#include <map>
#include <set>
#include <string_view>

#include <gtest/gtest.h>

#include "random_chains.h"
#include "solver/chain/op_context.h"
#include "solver/dp/baselines.h"

namespace memopt::solver {
namespace {

std::map<OpContext, int> counts(const std::vector<Op>& ops) {
  std::map<OpContext, int> n;
  for (OpContext c : op_contexts(ops)) ++n[c];
  return n;
}

TEST(OpContext, TableHasOneRowAndOneWordPerContext) {
  std::set<std::string_view> words;
  for (const OpContextInfo& i : kOpContexts) {
    EXPECT_EQ(context_word(i.context), i.word);
    EXPECT_TRUE(words.insert(i.word).second) << i.word;
  }
  EXPECT_EQ(words.size(), 9u);
}

TEST(OpContext, HandWrittenPlan) {
  // Stage 0 kept; stage 1 checkpointed and recomputed; stage 2 kept; an offload of a_1.
  const std::vector<Op> ops = {
      {OpKind::FwdKeep, 0}, {OpKind::FwdCkpt, 1}, {OpKind::Offload, 1}, {OpKind::FwdKeep, 2}, {OpKind::Loss, -1},
      {OpKind::Bwd, 2},     {OpKind::Prefetch, 1}, {OpKind::FwdKeep, 1}, {OpKind::Bwd, 1},     {OpKind::Bwd, 0}};
  const std::vector<OpContext> expected = {
      OpContext::ForwardKeep, OpContext::ForwardNoGrad, OpContext::NotCompute,    OpContext::ForwardKeep,
      OpContext::Loss,        OpContext::BwdOfKept,     OpContext::NotCompute,    OpContext::RecomputeKeep,
      OpContext::BwdAfterItsKeep, OpContext::BwdOfKept};
  EXPECT_EQ(op_contexts(ops), expected);
}

TEST(OpContext, ARecomputationAfterAKeptForwardIsTheOneItsBackwardFollows) {
  // A stage kept in the forward, then run again with fwd_keep after the loss: its
  // backward follows the later one.
  const std::vector<Op> ops = {{OpKind::FwdKeep, 0}, {OpKind::FwdKeep, 1}, {OpKind::Loss, -1}, {OpKind::Bwd, 1},
                               {OpKind::FwdKeep, 0}, {OpKind::Bwd, 0}};
  EXPECT_EQ(op_contexts(ops).back(), OpContext::BwdAfterItsKeep);
  EXPECT_EQ(op_contexts(ops)[3], OpContext::BwdOfKept);
}

// Note [A stage run back to back] in solver/chain/chain.h: only a bwd whose previous
// compute op is its own fwd_keep runs back to back; a copy between them does not count,
// another stage's ops do.
TEST(OpContext, ABackwardRightAfterItsForwardRunsBackToBack) {
  const std::vector<Op> ops = {{OpKind::FwdCkpt, 0}, {OpKind::FwdDrop, 1}, {OpKind::FwdKeep, 2},  {OpKind::Loss, -1},
                               {OpKind::Bwd, 2},     {OpKind::FwdKeep, 0}, {OpKind::FwdKeep, 1},  {OpKind::Prefetch, 3},
                               {OpKind::Bwd, 1},     {OpKind::Bwd, 0}};
  const std::vector<OpContext> c = op_contexts(ops);
  EXPECT_EQ(c[4], OpContext::BwdOfKept);  // the loss ran between fwd_keep 2 and bwd 2
  EXPECT_EQ(c[8], OpContext::BwdAfterItsKeep);
  EXPECT_EQ(c[9], OpContext::BwdOfRecomputed);
}

TEST(OpContext, BaselinesInClosedForm) {
  for (int L = 1; L <= 9; ++L) {
    const Chain chain = testing::homogeneous_chain(L, 1.0, 2.0, 100, 300);
    // store-all: every forward kept before the loss, every backward of a kept stage.
    auto n = counts(store_all_ops(chain));
    EXPECT_EQ(n[OpContext::ForwardKeep], L);
    EXPECT_EQ(n[OpContext::BwdOfKept], L);
    EXPECT_EQ(n[OpContext::Loss], 1);
    EXPECT_EQ(n.size(), 3u) << "L=" << L;
    // recompute-all: L no-grad forwards, then for each t one fwd_keep and, before it,
    // the no-grad forwards of stages 0 .. t-1 again: L(L-1)/2 in all.
    const auto ra = recompute_all(chain, int64_t{1} << 50);
    ASSERT_TRUE(ra.has_value());
    n = counts(*ra);
    EXPECT_EQ(n[OpContext::ForwardNoGrad], L);
    EXPECT_EQ(n[OpContext::RecomputeNoGrad], L * (L - 1) / 2);
    EXPECT_EQ(n[OpContext::RecomputeKeep], L);
    EXPECT_EQ(n[OpContext::BwdAfterItsKeep], L);  // each right after its fwd_keep
    EXPECT_EQ(n[OpContext::BwdOfRecomputed], 0);
    EXPECT_EQ(n[OpContext::ForwardKeep], 0);
    EXPECT_EQ(n[OpContext::BwdOfKept], 0);
  }
}

}  // namespace
}  // namespace memopt::solver

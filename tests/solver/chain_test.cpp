// chain_test.cpp: Chain's accessors follow docs/formats.md, "The chain model", and validate()
// names the field of each broken invariant.
//   ctest --test-dir build -R 'Chain'
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "solver/chain/chain.h"
#include "tests/solver/json_samples.h"

namespace memopt::solver {
namespace {

using testing::sample_profile;

TEST(Chain, AccessorsFollowSpecConventions) {
  const Chain c = sample_profile(false).chain;
  const int L = c.length();
  ASSERT_EQ(L, 3);
  EXPECT_EQ(c.x(0), 4096);  // a_0 is the input
  EXPECT_EQ(c.x(1), 1000);
  EXPECT_EQ(c.x(L), 4);
  EXPECT_EQ(c.x(L + 1), 0);  // x_{L+1} = 0
  EXPECT_EQ(c.xbar(1), 1500);
  EXPECT_EQ(c.xbar(L), 8004);
  EXPECT_EQ(c.xbar(L + 1), 0);  // x̄_{L+1} = 0
  EXPECT_EQ(c.uf(0), 0.1);
  EXPECT_EQ(c.uf(L), 0.0);  // the loss has no forward
  EXPECT_EQ(c.ub(1), 12.75);
  EXPECT_EQ(c.ub(L), 0.125);  // ub_L is the loss backward
  EXPECT_EQ(c.ftmp(2), 50000);
  EXPECT_EQ(c.ftmp(L), 0);
  EXPECT_EQ(c.btmp(2), 60000);
  EXPECT_EQ(c.btmp(L), 7);
}

TEST(Chain, SumFwdBwdCountsEveryStageOnceAndTheLoss) {
  const Chain c = sample_profile(false).chain;
  const double expected = 0.1 + 1.0 / 3.0 + 2.5e-7 + 12.75 + 7.0 + 1e-300 + 0.125;
  // Sums of a handful of doubles: a few ulps of the total.
  EXPECT_NEAR(sum_fwd_bwd_ms(c), expected, 1e-12 * expected);
}

TEST(Chain, ValidateAcceptsTheSampleAndZeroes) {
  EXPECT_EQ(validate(sample_profile(true).chain), "");
  Chain zeros;
  zeros.stages.resize(2);  // all sizes and times 0: legal, if useless
  EXPECT_EQ(validate(zeros), "");
}

// Note [A backward may peak below its gradient]: btmp_i down to -(x_i - c_{i+1}).
TEST(Chain, ValidateAcceptsABackwardTransientDownToMinusTheNewGradient) {
  Chain c = sample_profile(true).chain;
  c.stages[2].bwd_tmp_bytes = -2000;
  EXPECT_EQ(validate(c), "");
  // Stage 1 reads 1000 bytes; passing 400 of them through leaves 600 of d_1 new.
  c.stages[1].carried_bytes = 400;
  c.stages[1].bwd_tmp_bytes = -600;
  EXPECT_EQ(validate(c), "");
  c.stages[1].bwd_tmp_bytes = -601;
  EXPECT_NE(validate(c), "");
}

TEST(Chain, ValidateNamesTheFieldOfEachBrokenInvariant) {
  const Chain good = sample_profile(true).chain;
  struct Case {
    const char* name;
    void (*mutate)(Chain&);
    const char* message_start;
  };
  const Case cases[] = {
      {"no stages", [](Chain& c) { c.stages.clear(); }, "/stages: the chain has no stages"},
      {"negative input", [](Chain& c) { c.input_bytes = -8; }, "/input_bytes: -8 is negative"},
      {"negative out", [](Chain& c) { c.stages[1].out_bytes = -1; }, "/stages/1/out_bytes: -1 is negative"},
      {"negative tmp", [](Chain& c) { c.stages[2].fwd_tmp_bytes = -3; }, "/stages/2/fwd_tmp_bytes: -3 is negative"},
      // Stage 2 reads a_2 of 2000 bytes and carries nothing: its backward's peak is at
      // least 2000 bytes below "resident with d_2", never more.
      {"bwd tmp below d_i", [](Chain& c) { c.stages[2].bwd_tmp_bytes = -2001; },
       "/stages/2/bwd_tmp_bytes: -2001 is below -2000 (minus the new part of the input's gradient"},
      {"bwd tmp below d_i's new part", [](Chain& c) { c.stages[1].carried_bytes = 400; c.stages[1].bwd_tmp_bytes = -601; },
       "/stages/1/bwd_tmp_bytes: -601 is below -600"},
      {"nan time", [](Chain& c) { c.stages[0].fwd_ms = std::nan(""); }, "/stages/0/fwd_ms: nan is not a finite"},
      {"inf time", [](Chain& c) { c.stages[2].bwd_ms = INFINITY; }, "/stages/2/bwd_ms: inf is not a finite"},
      {"negative time", [](Chain& c) { c.stages[1].bwd_ms = -0.5; }, "/stages/1/bwd_ms: -0.5 is negative"},
      {"saved < out", [](Chain& c) { c.stages[1].saved_bytes = 512; },
       "/stages/1/saved_bytes: 512 is less than out_bytes (2000), but saved_bytes includes the output"},
      {"loss time", [](Chain& c) { c.loss.bwd_ms = -1; }, "/loss/bwd_ms: -1 is negative"},
      {"loss tmp", [](Chain& c) { c.loss.bwd_tmp_bytes = -1; }, "/loss/bwd_tmp_bytes: -1 is negative"},
      {"zero d2h", [](Chain& c) { c.link->d2h_bytes_per_s = 0; }, "/link/d2h_bytes_per_s: 0 is not a positive"},
      {"nan h2d", [](Chain& c) { c.link->h2d_bytes_per_s = std::nan(""); }, "/link/h2d_bytes_per_s: nan is not"},
      {"exabytes", [](Chain& c) { c.stages[2].saved_bytes = int64_t{1} << 61; },
       "/stages/2/saved_bytes: 2305843009213693952 brings the chain's sizes above 2^60 bytes"},
      {"eons", [](Chain& c) { c.stages[1].fwd_ms = 2e15; }, "/stages/1/fwd_ms: 2e+15 brings the chain's times above"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Chain c = good;
    k.mutate(c);
    const std::string msg = validate(c);
    EXPECT_TRUE(msg.starts_with(k.message_start)) << msg;
  }
}

}  // namespace
}  // namespace memopt::solver

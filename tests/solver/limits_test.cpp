// limits_test.cpp: the solver's borders of size and sense -- chains too long
// for the DP and tables too large are refused at once with the fix; schedules checked
// against a chain name the file, the op and the fix; NaN in a file says what it is.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "solver/dp/baselines.h"
#include "solver/dp/offload.h"
#include "solver/io/profile_json.h"
#include "solver/io/schedule_check.h"
#include "solver/search/solve.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

using testing::homogeneous_chain;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Limits, AChainOfTenThousandStagesIsRefusedAtOnceWithTheFix) {
  const Chain chain = homogeneous_chain(10000, 1, 2, 1000, 3000);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& k : kSolverKinds) {
    try {
      solve(chain, {1 << 30, k.kind});
      FAIL() << k.word << " took a chain of 10,000 stages";
    } catch (const ProblemTooLarge& e) {
      EXPECT_TRUE(contains(e.what(), "/stages")) << e.what();
      EXPECT_TRUE(contains(e.what(), "10000 stages")) << e.what();
      EXPECT_TRUE(contains(e.what(), "at most " + std::to_string(kMaxStages))) << e.what();
      EXPECT_TRUE(contains(e.what(), "merge")) << e.what();
    }
  }
  EXPECT_THROW(min_feasible_budget(chain, {0, SolverKind::Optimal}), ProblemTooLarge);
  // Refused before any work: far below the time of even one baseline's simulation pass.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(Limits, TheLongestChainAllowedIsSolved) {
  const Chain chain = homogeneous_chain(kMaxStages, 1, 2, 1000, 3000);
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::Optimal, 500}), "");
  // A linear baseline keeps the test quick; the DP's size check passed above.
  const Schedule s = solve(chain, {int64_t{1} << 40, SolverKind::RecomputeBlocks});
  EXPECT_EQ(s.chain_length, kMaxStages);
}

TEST(Limits, ATableAboveTheMemoryLimitNamesTheLargestSlotsThatFit) {
  const Chain chain = homogeneous_chain(400, 1, 2, 1000, 3000);
  const std::string e = check_problem_size(chain, {0, SolverKind::Optimal, 100000});
  ASSERT_FALSE(e.empty());
  EXPECT_TRUE(contains(e, "the DP table of 100000 slots on 400 stages")) << e;
  // The slots it suggests fit, one more does not.
  const int64_t pairs = int64_t{401} * 402 / 2;
  const int max_slots = static_cast<int>(kMaxTableBytes / (pairs * 4) - 1);
  EXPECT_TRUE(contains(e, "use " + std::to_string(max_slots) + " slots or fewer")) << e;
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::Optimal, max_slots}), "");
  EXPECT_NE(check_problem_size(chain, {0, SolverKind::Optimal, max_slots + 1}), "");
  // Baselines build no table.
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::Sqrt, 100000}), "");
}

// Over a link `optimal` also runs the offload DP, whose states take about 6 times
// the recompute table: the limit is lower, and named the same way.
TEST(Limits, TheOffloadDpsStatesAboveTheMemoryLimitNameTheLargestSlotsThatFit) {
  Chain chain = homogeneous_chain(96, 1, 2, 1000, 3000);
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::Optimal, 100000}), "");  // no link: the table fits
  chain.link = Link{16e9, 16e9};
  const std::string e = check_problem_size(chain, {0, SolverKind::Optimal, 100000});
  ASSERT_FALSE(e.empty());
  EXPECT_TRUE(contains(e, "the offload DP's states of 100000 slots on 96 stages")) << e;
  // (slots+1)·Σ_{e=0}^{L} (e+5) states (an item start e, and a left < e of the five
  // kinds or a stage), each of an 8-byte cost and a 16-byte way back.
  const int64_t bytes_per_slot = offload_dp_bytes(96, 1) - offload_dp_bytes(96, 0);
  EXPECT_EQ(offload_dp_bytes(96, 0), bytes_per_slot);
  EXPECT_EQ(bytes_per_slot, 24 * (97 * 96 / 2 + 5 * 97));
  const int max_slots = static_cast<int>(kMaxTableBytes / bytes_per_slot - 1);
  EXPECT_TRUE(contains(e, "use " + std::to_string(max_slots) + " slots or fewer")) << e;
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::Optimal, max_slots}), "");
  EXPECT_NE(check_problem_size(chain, {0, SolverKind::Optimal, max_slots + 1}), "");
  // recompute-only never runs it.
  EXPECT_EQ(check_problem_size(chain, {0, SolverKind::RecomputeOnly, 100000}), "");
}

TEST(Limits, AnInfeasibleBudgetSaysWhichBudgetToSolveFor) {
  const Chain chain = homogeneous_chain(4, 1, 2, 1000, 3000);
  try {
    solve(chain, {100, SolverKind::Optimal});
    FAIL();
  } catch (const InfeasibleBudget& e) {
    EXPECT_TRUE(contains(e.what(), "(" + std::to_string(e.min_budget_bytes) + " B): solve for at least that")) << e.what();
    EXPECT_NO_THROW(solve(chain, {e.min_budget_bytes, SolverKind::Optimal}));
  }
}

Schedule schedule_of(int length, std::vector<Op> ops) {
  Schedule s;
  s.chain_length = length;
  s.budget_bytes = 1 << 30;
  s.ops = std::move(ops);
  return s;
}

TEST(Limits, ASchedulesBadOpIsNamedWithItsIndexAndTheFix) {
  const Chain chain = homogeneous_chain(2, 1, 2, 1000, 3000);
  using K = OpKind;
  const std::vector<std::pair<std::vector<Op>, std::string>> cases = {
      // bwd before its loss
      {{{K::FwdKeep, 0}, {K::FwdKeep, 1}, {K::Bwd, 1}}, "/ops/2: op 2 (bwd 1): needs d_2 (run loss first)"},
      // a tensor used after it was dropped
      {{{K::FwdCkpt, 0}, {K::FwdDrop, 1}, {K::FwdKeep, 1}}, "/ops/2: op 2 (fwd_keep 1): needs the input of stage 1"},
      // offload of something not resident
      {{{K::FwdKeep, 0}, {K::Offload, 2}}, "/ops/1: op 1 (offload 2): a_2 is not resident"},
      // a backward that never finishes
      {{{K::FwdKeep, 0}, {K::FwdKeep, 1}, {K::Loss}}, "/ops: the schedule ends without d_0"},
  };
  Chain with_link = chain;
  with_link.link = Link{1e9, 1e9};
  for (const auto& [ops, expected] : cases) {
    try {
      check_schedule_for_chain(schedule_of(2, ops), with_link, "s.json", "p.json");
      FAIL() << "accepted: " << expected;
    } catch (const FormatError& e) {
      EXPECT_TRUE(contains(e.what(), "s.json: " + expected)) << e.what();
      EXPECT_TRUE(contains(e.what(), "memopt solve --profile p.json")) << e.what();
    }
  }
  try {
    check_schedule_for_chain(schedule_of(3, store_all_ops(chain)), chain, "s.json", "p.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_TRUE(contains(e.what(), "s.json: /chain_length: the schedule is for 3 stages but p.json has 2")) << e.what();
  }
  EXPECT_TRUE(check_schedule_for_chain(schedule_of(2, store_all_ops(chain)), chain, "s.json", "p.json").valid);
}

TEST(Limits, NaNInAFileIsCalledByItsName) {
  const std::string text = R"({"format": "memopt.profile", "version": 1, "input_bytes": NaN, "stages": []})";
  try {
    parse_profile(text, "p.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_TRUE(contains(e.what(), "p.json: not valid JSON")) << e.what();
    EXPECT_TRUE(contains(e.what(), "NaN and Infinity are not JSON numbers")) << e.what();
  }
  // A typo is not mistaken for NaN.
  try {
    parse_profile(R"({"format": nul})", "p.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_FALSE(contains(e.what(), "NaN")) << e.what();
  }
}

}  // namespace
}  // namespace memopt::solver

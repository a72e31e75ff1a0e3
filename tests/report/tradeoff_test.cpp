// tradeoff_test.cpp: the trade-off sweep (report/tradeoff.h) on a small synthetic
// chain -- budgets parsing, monotone optimal time, agreement with solve(), one
// measurement per distinct schedule, and tradeoff.json's round trip.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "report/tradeoff.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/simulate.h"
#include "tests/report/synthetic_profile.h"

namespace memopt::report {
namespace {

using solver::SolverKind;

int64_t store_all_peak(const solver::Chain& c) {
  return solver::store_all_peak_bytes(c);
}

TEST(ParseBudgetList, RangeEndsExactlyAtItsLastValue) {
  const int64_t ref = 1000003;  // not divisible by 20: the rounding must not lose 100%
  const auto b = parse_budget_list("20%:100%:5%", ref);
  ASSERT_EQ(b.size(), 17u);
  EXPECT_EQ(b.back(), ref);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

TEST(ParseBudgetList, ListsMixUnitsAndDeduplicate) {
  const auto b = parse_budget_list("50%,1KiB,100%,50%", 4096);
  EXPECT_EQ(b, (std::vector<int64_t>{1024, 2048, 4096}));
}

TEST(ParseBudgetList, BadInputNamesThePart) {
  for (const char* bad : {"", "20%:10%:5%", "20%:100%", "abc", "10%:20%:0"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_budget_list(bad, 1000), std::invalid_argument);
  }
  try {
    parse_budget_list("30%,lots", 1000);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lots"), std::string::npos) << e.what();
  }
}

TEST(StageCategory, OneColourPerActivity) {
  solver::StageActivity kept{1, 1, 0, false};
  solver::StageActivity ckpt{2, 1, 1, false};
  solver::StageActivity dropped{2, 1, 0, false};
  solver::StageActivity offloaded{1, 0, 1, true};
  EXPECT_EQ(stage_category(kept), "kept");
  EXPECT_EQ(stage_category(ckpt), "checkpointed");
  EXPECT_EQ(stage_category(dropped), "recomputed");
  EXPECT_EQ(stage_category(offloaded), "offloaded");
  solver::StageActivity saved_moved{1, 1, 0, false, true};  // offload_saved of its ā
  EXPECT_EQ(stage_category(saved_moved), "saved-offloaded");
}

// selective and pointwise join a report's defaults only where the chain has the
// stages they recompute.
TEST(Tradeoff, DefaultSolversAddTheRoleBaselinesWhereTheChainHasRoles) {
  solver::Chain chain = synthetic_profile().chain;
  const auto has = [](const std::vector<SolverKind>& v, SolverKind k) { return std::find(v.begin(), v.end(), k) != v.end(); };
  const auto plain = default_tradeoff_solvers(chain);
  EXPECT_TRUE(has(plain, SolverKind::Optimal));
  EXPECT_FALSE(has(plain, SolverKind::Selective));
  EXPECT_FALSE(has(plain, SolverKind::Pointwise));
  chain.stages[1].role = solver::StageRole::AttentionCore;
  const auto with_core = default_tradeoff_solvers(chain);
  EXPECT_TRUE(has(with_core, SolverKind::Selective));
  EXPECT_FALSE(has(with_core, SolverKind::Pointwise));
  EXPECT_EQ(with_core.size(), plain.size() + 1);
}

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profile = synthetic_profile();
    options.budgets_bytes = parse_budget_list("10%:100%:5%", store_all_peak(profile.chain));
    options.solvers = default_tradeoff_solvers(profile.chain);
    options.slots = 200;
    options.threads = 1;
  }
  solver::Profile profile;
  TradeoffOptions options;
};

TEST_F(SweepTest, OptimalTimeIsMonotoneAndNeverWorseThanAnySolver) {
  const TradeoffReport r = sweep(profile, options);
  ASSERT_EQ(r.points.size(), options.budgets_bytes.size() * options.solvers.size());
  std::map<int64_t, double> optimal_ms;
  for (const TradeoffPoint& p : r.points)
    if (p.solver == "optimal" && p.status == "ok") optimal_ms[p.budget_bytes] = p.predicted_time_ms;
  ASSERT_GE(optimal_ms.size(), 5u);
  // More memory never costs time, and once a budget is feasible every larger one is.
  double previous = 1e300;
  bool feasible = false;
  for (int64_t b : r.budgets_bytes) {
    const auto it = optimal_ms.find(b);
    if (feasible) {
      ASSERT_NE(it, optimal_ms.end()) << "optimal infeasible at a larger budget " << b;
    }
    if (it == optimal_ms.end()) continue;
    feasible = true;
    // Tolerance: slot rounding may pick different but equally fast plans; times are sums
    // of the same few doubles, so 1e-9 relative covers reordering.
    EXPECT_LE(it->second, previous * (1 + 1e-9)) << "budget " << b;
    previous = it->second;
  }
  EXPECT_NEAR(optimal_ms.at(r.store_all_peak_bytes), r.base_time_ms, 1e-9 * r.base_time_ms);
  for (const TradeoffPoint& p : r.points) {
    if (p.status != "ok") continue;
    EXPECT_LE(p.predicted_peak_bytes, p.budget_bytes) << p.solver;
    EXPECT_EQ(p.stages.size(), profile.chain.stages.size());
    if (optimal_ms.count(p.budget_bytes)) {
      EXPECT_LE(optimal_ms.at(p.budget_bytes), p.predicted_time_ms * (1 + 1e-9)) << p.solver << " " << p.budget_bytes;
    }
  }
}

TEST_F(SweepTest, PointsMatchSolveAndTheJsonFields) {
  const TradeoffReport r = sweep(profile, options);
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("format"), "memopt.tradeoff");
  EXPECT_EQ(j.at("points").size(), r.points.size());
  EXPECT_EQ(j.at("stage_names").size(), 6u);
  // optimal at each budget is solved with the plans it found at the smaller ones
  // (Note [Known plans] in solver/search/optimal.cpp), as the sweep does.
  std::vector<std::vector<solver::Op>> optimal_below;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const TradeoffPoint& p = r.points[i];
    const nlohmann::json& pj = j["points"][i];
    EXPECT_EQ(pj.at("solver"), p.solver);
    EXPECT_EQ(pj.at("budget_bytes"), p.budget_bytes);
    EXPECT_EQ(pj.at("status"), p.status);
    if (p.status != "ok") continue;
    const auto kind = solver::solver_kind_from_word(p.solver);
    solver::SolveOptions o{p.budget_bytes, *kind, options.slots, 1, false};
    if (*kind == SolverKind::Optimal) o.known_plans = optimal_below;
    const solver::Schedule s = solver::solve(profile.chain, o);
    if (*kind == SolverKind::Optimal) optimal_below.push_back(s.ops);
    EXPECT_EQ(pj["predicted"]["peak_bytes"], s.predicted.peak_bytes);
    EXPECT_DOUBLE_EQ(pj["predicted"]["time_ms"].get<double>(), s.predicted.time_ms);
    EXPECT_EQ(pj["num_ops"], static_cast<int>(s.ops.size()));
  }
  // min_budget: the smallest budget of the sweep where optimal works is at least it.
  EXPECT_GT(r.min_budget_bytes.at("optimal"), 0);
  EXPECT_LE(r.min_budget_bytes.at("optimal"), r.min_budget_bytes.at("recompute-all"));
}

// A measurement that reports each schedule's predicted time times `factor`, with a
// spread of +-5% around it.
MeasuredPoint scaled(const solver::Schedule& s, double factor) {
  const double t = factor * s.predicted.time_ms;
  return {s.predicted.peak_bytes, s.predicted.peak_bytes + 512, {t, 0.95 * t, 1.05 * t}, 3, 2, std::nullopt, "", std::nullopt};
}

std::string key_of(const solver::Schedule& s) {
  std::string key;
  for (const solver::Op& op : s.ops) key += solver::to_string(op) + ";";
  return key;
}

TEST_F(SweepTest, EachDistinctScheduleIsMeasuredOnceAllTogether) {
  int calls = 0;
  std::map<std::string, int> seen;
  const MeasureFn measure = [&](const std::vector<solver::Schedule>& schedules) {
    ++calls;
    std::vector<MeasuredPoint> out;
    for (const solver::Schedule& s : schedules) {
      ++seen[key_of(s)];
      out.push_back(scaled(s, 1.5));
    }
    EXPECT_EQ(schedules.front().ops, solver::store_all_ops(profile.chain));  // the base comes first
    return out;
  };
  const TradeoffReport r = sweep(profile, options, measure);
  EXPECT_EQ(calls, 1);  // one interleaved measurement of everything
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
  ASSERT_TRUE(r.measured_base);
  int reused = 0;
  for (const TradeoffPoint& p : r.points) {
    EXPECT_EQ(p.measured.has_value(), p.status == "ok") << p.solver;
    if (p.measured && !p.measured->same_ops_as.empty()) ++reused;
  }
  EXPECT_GT(reused, 0);  // store-all at 100% is the unbudgeted base; the baselines repeat
}

TEST_F(SweepTest, FlagsAPlanMeasuredFasterThanStoreAllBeyondTheSpread) {
  // Store-all measures as predicted; every other schedule at half store-all's time,
  // which is below store-all's spread.
  const MeasureFn measure = [&](const std::vector<solver::Schedule>& schedules) {
    const double store_all_ms = schedules.front().predicted.time_ms;
    std::vector<MeasuredPoint> out;
    for (const solver::Schedule& s : schedules)
      out.push_back(scaled(s, s.ops == solver::store_all_ops(profile.chain) ? 1.0 : 0.5 * store_all_ms / s.predicted.time_ms));
    return out;
  };
  const TradeoffReport r = sweep(profile, options, measure);
  const nlohmann::json j = to_json(r);
  int flagged = 0, unflagged = 0;
  for (const nlohmann::json& p : j["points"]) {
    if (!p.contains("measured")) continue;
    const bool is_store_all = p["measured"].value("same_ops_as", "") == "store-all@unbudgeted";
    EXPECT_EQ(p["measured"]["faster_than_store_all"].get<bool>(), !is_store_all) << p.dump();
    (is_store_all ? unflagged : flagged) += 1;
  }
  EXPECT_GT(flagged, 0);
  EXPECT_GT(unflagged, 0);
  const std::string md = tradeoff_readme(r, {});
  EXPECT_NE(md.find("**Flagged:** measured faster than store-all"), std::string::npos) << md;
  EXPECT_NE(md.find("(!)"), std::string::npos);
}

TEST_F(SweepTest, JsonRoundTrips) {
  const MeasureFn measure = [](const std::vector<solver::Schedule>& schedules) {
    std::vector<MeasuredPoint> out;
    for (const solver::Schedule& s : schedules) {
      out.push_back(scaled(s, 0.9));
      out.back().max_abs_grad_diff = 1e-7;
      out.back().predicted_in_rounds_ms = 1.25 * s.predicted.time_ms;
    }
    return out;
  };
  TradeoffReport r = sweep(profile, options, measure);
  ASSERT_TRUE(r.measured_base->predicted_in_rounds_ms);
  // Measured 0.9x and predicted 1.25x from the rounds' times: 0.72 for every schedule.
  EXPECT_NE(tradeoff_readme(r, {}).find("measured rounds (`predicted_in_rounds_ms` in tradeoff.json; "
                                         "docs/measurement.md, \"Stage times from the measured rounds\"), "
                                         "measured/predicted time is 0.72 to 0.72"),
            std::string::npos);
  r.command = "memopt tradeoff --profile p.json --out d";
  r.profile_path = "p.json";
  r.machine = this_machine();
  const nlohmann::json j = to_json(r);
  const nlohmann::json again = to_json(tradeoff_from_json(nlohmann::json::parse(j.dump())));
  EXPECT_EQ(j, again);
  EXPECT_THROW(tradeoff_from_json({{"format", "memopt.profile"}}), std::invalid_argument);
  // The file reads top-down: what it is, then how it was made, then the numbers.
  const nlohmann::ordered_json written = to_json(r);
  std::vector<std::string> keys;
  for (auto it = written.begin(); it != written.end() && keys.size() < 4; ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"format", "version", "command", "profile"}));
}

TEST_F(SweepTest, ReadmeLabelsPredictedAndMeasured) {
  const TradeoffReport r = sweep(profile, options);
  const std::string md = tradeoff_readme(r, {});
  EXPECT_NE(md.find("predicted"), std::string::npos);
  EXPECT_NE(md.find("| budget |"), std::string::npos);
  EXPECT_NE(md.find("nothing was measured"), std::string::npos);
}

}  // namespace
}  // namespace memopt::report

// offload_pipeline_test.cpp: the pipelined family (Note [Pipelined offload candidates]
// in solver/dp/offload_pipeline.h) against the plain search it speeds up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"
#include "solver/chain/simulate.h"
#include "solver/dp/baselines.h"
#include "solver/dp/offload_pipeline.h"
#include "solver/dp/rotor.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

// The family's search as the header states it, with nothing skipped: every p whose
// prefix the table solves, every q, the inputs only where the plan without them does
// not fit at d = 1, and the largest fitting d by bisection; every plan simulated whole.
std::optional<std::vector<Op>> plain_family_search(const Chain& chain, int64_t budget_bytes, const DpOptions& options) {
  const int L = chain.length();
  const RecomputeTable table(chain, budget_bytes, options);
  const int64_t m = options.slots - table.x_slots(0);
  std::optional<std::vector<Op>> best;
  double best_ms = 0;
  const auto consider = [&](std::vector<Op> ops) {
    const SimResult r = simulate_timeline(chain, ops);
    if (!fits(r, budget_bytes)) return false;
    if (!best || r.time_ms < best_ms) { best = std::move(ops); best_ms = r.time_ms; }
    return true;
  };
  for (int p = 0; p < L; ++p) {
    std::vector<Op> prefix;
    if (p > 0) {
      if (table.value(0, p - 1, m) >= RecomputeTable::kInfinity) continue;
      table.emit(0, p - 1, m, prefix);
    }
    for (int q = p + 1; q <= L; ++q)
      for (const bool inputs : {false, true}) {
        const bool fits_near = consider(pipelined_offload_ops(chain, p, q, 1, prefix, inputs));
        int lo = 1, hi = L - p + 1;
        while (fits_near && lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (consider(pipelined_offload_ops(chain, p, q, mid, prefix, inputs))) lo = mid;
          else hi = mid - 1;
        }
        if (fits_near) break;
      }
  }
  return best;
}

// Notes [Middles too short to fit], [Middles too slow to win] and [The longest prefix
// first] and the compute-time skip in offload_pipeline.cpp: the same plan, op for op,
// as the plain search, on chains with and without carried bytes, fast and slow links,
// and budgets from below the least that fits to store-all's. Half the chains have
// whole-millisecond times, so that plans of different prefixes often tie.
TEST(OffloadPipeline, SkippingSurelyOverPlansChangesNoPlan) {
  std::mt19937_64 rng(907);
  int num_plans = 0, num_none = 0;
  int64_t middles_cut = 0;
  for (int trial = 0; trial < 150; ++trial) {
    testing::RandomChainOptions o;
    o.length = 3 + trial % 14;
    o.integer_ms = trial % 2 == 0;
    o.carry_probability = trial % 3 == 0 ? 0.6 : 0.0;
    Chain chain = testing::random_chain(rng, o);
    const double rates[] = {200.0, 2000.0, 20000.0};
    chain.link = Link{rates[trial % 3], rates[(trial / 3) % 3]};
    const int64_t store_all = simulate_sequential(chain, store_all_ops(chain)).peak_bytes;
    for (const int tenths : {3, 5, 7, 9}) {
      const int64_t budget = std::max<int64_t>(1, store_all * tenths / 10);
      const DpOptions options{200, false, 1};
      SCOPED_TRACE("trial " + std::to_string(trial) + ", budget " + std::to_string(budget));
      PipelineSearchCounts counts;
      const auto fast = solve_offload_pipeline(chain, budget, options, nullptr, &counts);
      middles_cut += counts.middles_cut;
      const auto plain = plain_family_search(chain, budget, options);
      ASSERT_EQ(fast.has_value(), plain.has_value());
      if (!fast) { ++num_none; continue; }
      // Equal times may come from different plans only if the plain search visits them
      // in another order; it does not: both return the first fastest.
      EXPECT_EQ(*fast, *plain);
      ++num_plans;
    }
  }
  EXPECT_GT(num_plans, 200);  // not vacuous: plans at most budgets, none at some
  EXPECT_GT(num_none, 100);
  EXPECT_GT(middles_cut, 1000);  // and the bound of Note [Middles too slow to win] cut
  std::printf("plans %d, none %d, middles cut %lld\n", num_plans, num_none, static_cast<long long>(middles_cut));
}

}  // namespace
}  // namespace memopt::solver

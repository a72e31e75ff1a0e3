// stats_test.cpp: the one median and quantile rule, against values worked by hand and
// against a brute-force definition (a median has as many values at or below it as at
// or above it).
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "common/stats.h"

namespace memopt::common {
namespace {

TEST(Median, EvenCountAveragesTheMiddlePair) {
  EXPECT_EQ(median({90.3, 132.7}), (90.3 + 132.7) / 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Median, OddCountIsTheMiddleValue) {
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({7}), 7);
}

TEST(Median, RefusesNoValues) {
  EXPECT_THROW(median({}), std::invalid_argument);
  EXPECT_THROW(spread({}), std::invalid_argument);
  EXPECT_THROW(quantile({}, 0.5), std::invalid_argument);
  EXPECT_THROW(quantile({1, 2}, 1.5), std::invalid_argument);
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> v = {10, 40, 20, 30};  // sorted: 10 20 30 40
  EXPECT_EQ(quantile(v, 0.0), 10);
  EXPECT_EQ(quantile(v, 1.0), 40);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 17.5);  // position 0.75: 10 + 0.75 * 10
  EXPECT_DOUBLE_EQ(quantile(v, 0.75), 32.5);  // position 2.25: 30 + 0.25 * 10
}

TEST(Spread, IsTheMedianAndTheQuartiles) {
  const Spread s = spread({10, 40, 20, 30});
  EXPECT_EQ(s.median, 25);
  EXPECT_DOUBLE_EQ(s.q25, 17.5);
  EXPECT_DOUBLE_EQ(s.q75, 32.5);
  EXPECT_TRUE(below_beyond_spread(spread({1, 2, 3}), spread({4, 5, 6})));
  // Overlapping ranges are not "beyond the spread", whichever medians they have.
  EXPECT_FALSE(below_beyond_spread(spread({1, 5, 6}), spread({4, 5, 6})));
  EXPECT_FALSE(below_beyond_spread(spread({4, 5, 6}), spread({1, 2, 3})));
}

TEST(Quantile, HalfIsTheMedianOnRandomSamples) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> value(-5, 5);
  for (int n = 1; n <= 40; ++n) {
    std::vector<double> v(n);
    for (double& x : v) x = value(rng);
    const double m = median(v);
    EXPECT_DOUBLE_EQ(quantile(v, 0.5), m);
    int at_or_below = 0, at_or_above = 0;
    for (double x : v) {
      at_or_below += x <= m;
      at_or_above += x >= m;
    }
    EXPECT_GE(at_or_below, (n + 1) / 2);
    EXPECT_GE(at_or_above, (n + 1) / 2);
  }
}

}  // namespace
}  // namespace memopt::common

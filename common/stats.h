// stats.h: the summary statistics every measurement in memopt reports -- one median,
// one quantile rule -- so that a profile, a run and a report computing "the median"
// of the same numbers print the same figure. Plain C++.
#pragma once

#include <vector>

namespace memopt::common {

// The middle value of v; for an even count, the mean of the two middle values.
// Throws std::invalid_argument on an empty v (a median of nothing is a caller's bug).
double median(std::vector<double> v);

// The q-quantile of v (0 <= q <= 1) with linear interpolation between order
// statistics (the rule NumPy calls "linear"): quantile(v, 0.5) == median(v).
double quantile(std::vector<double> v, double q);

// A sample as memopt reports every measured time: its median and interquartile range
// (quantile() at 0.25 and 0.75). Throws std::invalid_argument on an empty v.
struct Spread {
  double median = 0;
  double q25 = 0;
  double q75 = 0;
};
Spread spread(const std::vector<double>& v);

// a and b differ beyond their spreads: a's whole interquartile range lies below b's.
bool below_beyond_spread(const Spread& a, const Spread& b);

}  // namespace memopt::common

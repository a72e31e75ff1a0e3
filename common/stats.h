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

// The median of v without its first element (the whole of v when it has one): the
// first step of a training run pays for lazy initialisation.
double median_after_first(std::vector<double> v);

}  // namespace memopt::common

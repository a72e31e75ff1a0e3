// stats.cpp: median and quantiles.
#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace memopt::common {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) throw std::invalid_argument("quantile of no values");
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("quantile: q must be in [0, 1], got " + std::to_string(q));
  std::sort(v.begin(), v.end());
  const double position = q * static_cast<double>(v.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, v.size() - 1);
  const double weight = position - static_cast<double>(below);
  return v[below] + weight * (v[above] - v[below]);
}

double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median of no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Spread spread(const std::vector<double>& v) { return {median(v), quantile(v, 0.25), quantile(v, 0.75)}; }

bool below_beyond_spread(const Spread& a, const Spread& b) { return a.q75 < b.q25; }

}  // namespace memopt::common

// bias_gelu_test.cpp: the CPU fused bias + tanh-GELU of kernels/bias_gelu.h against
// the double-precision reference, and the reference's derivative against central
// finite differences (so a wrong closed form cannot pass on both sides).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bias_gelu.h"
#include "kernels/cpu/reference.h"

namespace memopt::kernels {
namespace {

// Tolerances for float32 against double. Each output is a handful of float ops on
// z = h + b plus tanhf (a few ulp), so relative error stays within tens of float eps
// (1.2e-7): rtol 1e-5. Where GELU is near zero (z << 0), 1 + tanh cancels, leaving an
// absolute error of about |z|/2 * ulp(1) <= 5e-7 for |z| <= 8: atol 1e-6 (times |dy|,
// which is O(1) here, for the gradient).
constexpr double kAtol = 1e-6, kRtol = 1e-5;

struct Data {
  int64_t rows, cols;
  std::vector<float> h, b, dy;
};

Data make_data(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> wide(0.0f, 3.0f), unit(0.0f, 1.0f);
  Data d{rows, cols, {}, {}, {}};
  for (int64_t i = 0; i < rows * cols; ++i) d.h.push_back(wide(rng));
  for (int64_t i = 0; i < cols; ++i) d.b.push_back(unit(rng));
  for (int64_t i = 0; i < rows * cols; ++i) d.dy.push_back(unit(rng));
  return d;
}

TEST(BiasGelu, ReferenceDerivativeMatchesFiniteDifferences) {
  for (double z = -8.0; z <= 8.0; z += 0.0625) {
    const double step = 1e-5;
    const double fd = (reference::gelu_tanh(z + step) - reference::gelu_tanh(z - step)) / (2 * step);
    // Truncation O(step^2 * |f'''|) ~ 1e-10, rounding ~ eps / step ~ 1e-11.
    ASSERT_NEAR(reference::gelu_tanh_grad(z), fd, 1e-8) << "z " << z;
  }
}

TEST(BiasGelu, ReferenceMatchesExactGeluShape) {
  EXPECT_EQ(reference::gelu_tanh(0.0), 0.0);
  EXPECT_NEAR(reference::gelu_tanh(20.0), 20.0, 1e-12);  // identity for large z
  EXPECT_NEAR(reference::gelu_tanh(-20.0), 0.0, 1e-12);
  EXPECT_NEAR(reference::gelu_tanh_grad(0.0), 0.5, 1e-15);
}

TEST(BiasGelu, ForwardMatchesReference) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {64, 512}}) {
    const Data d = make_data(rows, cols, static_cast<uint32_t>(rows * 31 + cols));
    std::vector<float> y(d.h.size());
    std::vector<double> ref(d.h.size());
    cpu::bias_gelu_forward(d.h.data(), d.b.data(), y.data(), rows, cols);
    reference::bias_gelu_forward(d.h.data(), d.b.data(), ref.data(), rows, cols);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_LE(std::abs(y[i] - ref[i]), kAtol + kRtol * std::abs(ref[i])) << "element " << i;
  }
}

TEST(BiasGelu, BackwardMatchesReference) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {512, 64}}) {
    const Data d = make_data(rows, cols, static_cast<uint32_t>(rows * 17 + cols));
    std::vector<float> dh(d.h.size()), db(static_cast<size_t>(cols));
    std::vector<double> ref_dh(d.h.size()), ref_db(static_cast<size_t>(cols));
    cpu::bias_gelu_backward(d.dy.data(), d.h.data(), d.b.data(), dh.data(), db.data(), rows, cols);
    reference::bias_gelu_backward(d.dy.data(), d.h.data(), d.b.data(), ref_dh.data(), ref_db.data(), rows, cols);
    std::vector<double> db_bound(static_cast<size_t>(cols), 0.0);
    for (size_t i = 0; i < dh.size(); ++i) {
      const double tol = kAtol * std::abs(d.dy[i]) + kRtol * std::abs(ref_dh[i]);
      ASSERT_LE(std::abs(dh[i] - ref_dh[i]), tol) << "element " << i;
      db_bound[i % static_cast<size_t>(cols)] += tol;
    }
    // db sums dh over rows (in double, one final rounding): its error is at most the
    // sum of the elements' bounds plus that rounding.
    for (size_t c = 0; c < db.size(); ++c)
      ASSERT_LE(std::abs(db[c] - ref_db[c]), db_bound[c] + 1.2e-7 * std::abs(ref_db[c])) << "column " << c;
  }
}

TEST(BiasGelu, BackwardWithoutBiasGradientAndInPlace) {
  const Data d = make_data(5, 9, 3);
  std::vector<float> separate(d.h.size()), in_place = d.dy;
  cpu::bias_gelu_backward(d.dy.data(), d.h.data(), d.b.data(), separate.data(), nullptr, 5, 9);
  cpu::bias_gelu_backward(in_place.data(), d.h.data(), d.b.data(), in_place.data(), nullptr, 5, 9);
  EXPECT_EQ(separate, in_place);
}

}  // namespace
}  // namespace memopt::kernels

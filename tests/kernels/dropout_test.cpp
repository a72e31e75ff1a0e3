// dropout_test.cpp: the CPU dropout of kernels/dropout.h against the per-element
// reference (every offset alignment, head and tail), its backward against the
// forward's mask, and its statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/dropout.h"

namespace memopt::kernels {
namespace {

std::vector<float> ramp(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 0.25f + 0.001f * static_cast<float>(i);
  return x;
}

TEST(Dropout, MaskEqualsReferenceForEveryAlignment) {
  for (uint64_t offset : {0ull, 1ull, 2ull, 3ull, 4ull, 4094ull, (1ull << 34) + 3}) {
    for (int64_t n : {0, 1, 3, 4, 5, 17, 1000}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", n " + std::to_string(n));
      const DropoutKey key{0x0123456789abcdefull, offset};
      std::vector<uint8_t> mask(static_cast<size_t>(n));
      cpu::dropout_mask(mask.data(), n, 0.3f, key);
      EXPECT_EQ(mask, reference::dropout_mask(n, 0.3, key));
    }
  }
}

// The mask of a call is the slice of a longer call's mask at its offset: what lets
// one (seed, offset) stream be cut into calls anywhere, on any device.
TEST(Dropout, CallsAreSlicesOfOneStream) {
  const DropoutKey whole{99, 0};
  std::vector<uint8_t> all(300);
  cpu::dropout_mask(all.data(), 300, 0.5f, whole);
  std::vector<uint8_t> part(101);
  cpu::dropout_mask(part.data(), 101, 0.5f, {99, 77});
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 77));
}

TEST(Dropout, ForwardScalesKeptAndZeroesDropped) {
  const int64_t n = 4099;
  const float p = 0.2f;
  const std::vector<float> x = ramp(n);
  std::vector<float> y(static_cast<size_t>(n));
  const DropoutKey key{7, 13};
  cpu::dropout_forward(x.data(), y.data(), n, p, key);
  const std::vector<uint8_t> mask = reference::dropout_mask(n, p, key);
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = static_cast<size_t>(i);
    // Exact: one float multiply by the same float scale on both sides.
    ASSERT_EQ(y[s], mask[s] ? x[s] * (1.0f / (1.0f - p)) : 0.0f) << "element " << i;
  }
}

TEST(Dropout, BackwardRegeneratesTheForwardMask) {
  const int64_t n = 1001;
  const float p = 0.35f;
  const DropoutKey key{0xfeedbeefcafef00dull, 5};
  const std::vector<float> ones(static_cast<size_t>(n), 1.0f), dy = ramp(n);
  std::vector<float> fwd(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  cpu::dropout_forward(ones.data(), fwd.data(), n, p, key);
  cpu::dropout_backward(dy.data(), dx.data(), n, p, key);
  for (size_t i = 0; i < fwd.size(); ++i) ASSERT_EQ(dx[i], fwd[i] * dy[i]) << "element " << i;
}

TEST(Dropout, ZeroProbabilityKeepsEverything) {
  std::vector<uint8_t> mask(1000);
  cpu::dropout_mask(mask.data(), 1000, 0.0f, {1, 0});
  for (uint8_t m : mask) ASSERT_EQ(m, 1);
}

// The kept fraction is Binomial(n, 1 - p): within 5 standard deviations (a false
// failure has probability < 1e-6), for several p and seeds; distinct seeds and
// disjoint offsets give masks that agree only by chance (about p^2 + (1-p)^2).
TEST(Dropout, KeptFractionAndIndependence) {
  const int64_t n = 1 << 18;
  for (float p : {0.1f, 0.5f, 0.9f}) {
    std::vector<uint8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)), c(static_cast<size_t>(n));
    cpu::dropout_mask(a.data(), n, p, {11, 0});
    cpu::dropout_mask(b.data(), n, p, {12, 0});
    cpu::dropout_mask(c.data(), n, p, {11, static_cast<uint64_t>(n)});
    int64_t kept = 0, same_ab = 0, same_ac = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      kept += a[i];
      same_ab += a[i] == b[i];
      same_ac += a[i] == c[i];
    }
    const double q = 1.0 - p, sd = std::sqrt(n * p * q), agree = p * p + q * q;
    const double sd_agree = std::sqrt(n * agree * (1 - agree));
    EXPECT_NEAR(static_cast<double>(kept), n * q, 5 * sd) << "p " << p;
    EXPECT_NEAR(static_cast<double>(same_ab), n * agree, 5 * sd_agree) << "p " << p;
    EXPECT_NEAR(static_cast<double>(same_ac), n * agree, 5 * sd_agree) << "p " << p;
  }
}

TEST(Dropout, ThresholdIsPRoundedToTwoToTheMinus32) {
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(0.5f), 0x80000000u);
  EXPECT_EQ(dropout_threshold(0.25f), 0x40000000u);
  EXPECT_NEAR(dropout_threshold(0.1f) / 4294967296.0, 0.1, 1e-8);  // float 0.1 is 0.1 to 1.5e-9
}

}  // namespace
}  // namespace memopt::kernels

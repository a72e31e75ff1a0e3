// cross_entropy_test.cpp: the blocked cross-entropy kernels against a plain
// double-precision reference, row by row -- vocabulary blocks that divide neither the
// vocabulary nor each other, rows inside a wider buffer, logits far beyond exp's
// range, and ignored rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/cross_entropy.h"

namespace memopt::kernels {
namespace {

constexpr int64_t kIgnore = -100;

struct Problem {
  int64_t rows, vocab, stride;
  std::vector<float> logits;    // rows x stride, the first `vocab` columns used
  std::vector<int64_t> targets;
};

Problem random_problem(int64_t rows, int64_t vocab, int64_t stride, float spread, uint32_t seed) {
  Problem p{rows, vocab, stride, std::vector<float>(rows * stride, 7.0f), std::vector<int64_t>(rows)};
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit(0.0f, spread);
  std::uniform_int_distribution<int64_t> cls(0, vocab - 1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < vocab; ++c) p.logits[r * stride + c] = logit(rng);
    p.targets[r] = cls(rng);
  }
  return p;
}

// The loss and lse of every row, the vocabulary folded in blocks of `block` columns.
void blocked_loss(const Problem& p, int64_t block, std::vector<float>& lse, std::vector<float>& loss) {
  std::vector<float> m(p.rows, -std::numeric_limits<float>::infinity()), s(p.rows, 0.0f), t(p.rows, 0.0f);
  for (int64_t c0 = 0; c0 < p.vocab; c0 += block) {
    const LogitsBlock b{p.logits.data() + c0, p.rows, std::min(block, p.vocab - c0), p.stride, c0};
    cpu::cross_entropy_lse_block(b, p.targets.data(), kIgnore, m.data(), s.data(), t.data());
  }
  lse.assign(p.rows, -1.0f);
  loss.assign(p.rows, -1.0f);
  cpu::cross_entropy_finish(p.rows, m.data(), s.data(), t.data(), p.targets.data(), kIgnore, lse.data(), loss.data());
}

// fp32 exponentials and a float sum of up to V terms: the loss is good to a few ulps
// of its own size per term summed, far inside 1e-5 relative plus 1e-5 absolute.
double tolerance(double ref) { return 1e-5 + 1e-5 * std::fabs(ref); }

TEST(CrossEntropyKernel, BlockedLossEqualsTheReferenceForAnyBlocking) {
  const Problem p = random_problem(9, 1000, 1013, 3.0f, 1);
  for (const int64_t block : {1, 7, 333, 999, 1000, 4096}) {
    SCOPED_TRACE(block);
    std::vector<float> lse, loss;
    blocked_loss(p, block, lse, loss);
    for (int64_t r = 0; r < p.rows; ++r) {
      const double ref = reference::cross_entropy_row(p.logits.data() + r * p.stride, p.vocab, p.targets[r]);
      EXPECT_NEAR(loss[r], ref, tolerance(ref)) << "row " << r;
      EXPECT_NEAR(lse[r] - loss[r], p.logits[r * p.stride + p.targets[r]], 1e-4);  // lse - loss = target logit
    }
  }
}

TEST(CrossEntropyKernel, LogitsBeyondExpsRangeStayFinite) {
  // exp(x) overflows float above 88.7; these logits reach about +-4,000.
  const Problem p = random_problem(5, 300, 300, 1000.0f, 2);
  std::vector<float> lse, loss;
  blocked_loss(p, 64, lse, loss);
  for (int64_t r = 0; r < p.rows; ++r) {
    const double ref = reference::cross_entropy_row(p.logits.data() + r * p.stride, p.vocab, p.targets[r]);
    ASSERT_TRUE(std::isfinite(loss[r]));
    EXPECT_NEAR(loss[r], ref, tolerance(ref)) << "row " << r;
  }
}

TEST(CrossEntropyKernel, GradientBlocksEqualTheReferenceScaled) {
  Problem p = random_problem(6, 777, 800, 2.0f, 3);
  std::vector<float> lse, loss;
  blocked_loss(p, 100, lse, loss);
  const Problem original = p;
  const float scale = 1.0f / 6;
  for (int64_t c0 = 0; c0 < p.vocab; c0 += 250)
    cpu::cross_entropy_grad_block(p.logits.data() + c0, p.rows, std::min<int64_t>(250, p.vocab - c0), p.stride, c0,
                                  p.targets.data(), kIgnore, lse.data(), scale);
  std::vector<double> ref(p.vocab);
  for (int64_t r = 0; r < p.rows; ++r) {
    reference::cross_entropy_row_grad(original.logits.data() + r * p.stride, p.vocab, p.targets[r], ref.data());
    for (int64_t c = 0; c < p.vocab; ++c)
      ASSERT_NEAR(p.logits[r * p.stride + c], scale * ref[c], 1e-6 + 1e-5 * std::fabs(scale * ref[c]))
          << "row " << r << " col " << c;
    // The padding past the vocabulary is not touched.
    for (int64_t c = p.vocab; c < p.stride; ++c) EXPECT_EQ(p.logits[r * p.stride + c], 7.0f);
  }
}

TEST(CrossEntropyKernel, IgnoredRowsAddNothing) {
  Problem p = random_problem(4, 50, 50, 1.0f, 4);
  p.targets[1] = kIgnore;
  p.targets[3] = kIgnore;
  std::vector<float> lse, loss;
  blocked_loss(p, 16, lse, loss);
  EXPECT_EQ(loss[1], 0.0f);
  EXPECT_EQ(lse[3], 0.0f);
  EXPECT_GT(loss[0], 0.0f);
  cpu::cross_entropy_grad_block(p.logits.data(), p.rows, p.vocab, p.stride, 0, p.targets.data(), kIgnore, lse.data(),
                                1.0f);
  for (int64_t c = 0; c < p.vocab; ++c) {
    EXPECT_EQ(p.logits[1 * p.stride + c], 0.0f);
    EXPECT_EQ(p.logits[3 * p.stride + c], 0.0f);
  }
  // A kept row's gradient sums to zero (softmax sums to one, minus the one-hot).
  double sum = 0;
  for (int64_t c = 0; c < p.vocab; ++c) sum += p.logits[c];
  EXPECT_NEAR(sum, 0.0, 1e-6);
}

}  // namespace
}  // namespace memopt::kernels

// cpu/cross_entropy.cpp: the CPU kernels of kernels/cross_entropy.h, row by row; each
// row's loops are plain enough for the compiler to vectorize.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/exp_approx.h"

namespace memopt::kernels::cpu {
namespace {

// Note [Lane reductions]
// A float max or sum over a row is a chain of dependent operations the compiler may
// not reorder (the result would round differently), so it stays scalar. Kept in
// kLanes independent partial results -- lane j takes columns j, j + kLanes, ... --
// the loop vectorizes; the lanes are combined at the end. The sum's order differs
// from a left-to-right one by rounding only, and exp is exp_approx's, a few ulp from
// libm's: the tests compare against a double-precision reference, not bit for bit.
constexpr int64_t kLanes = 8;

// Note [AVX2 clones]
// The project builds for baseline x86-64 (SSE2: 4 floats a vector). These row loops
// are also compiled for AVX2 (8 floats), chosen at load time by the CPU the process
// runs on (GCC's target_clones). AVX2 without FMA: the same operations in the same
// order, so both clones give the same bits, only twice as many at a time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MEMOPT_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MEMOPT_AVX2_CLONES
#endif

MEMOPT_AVX2_CLONES float row_max(const float* x, int64_t cols) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = lane[j] < x[c + j] ? x[c + j] : lane[j];
  float m = *std::max_element(lane, lane + kLanes);
  for (; c < cols; ++c) m = std::max(m, x[c]);
  return m;
}

// sum over the row of exp(x - m).
MEMOPT_AVX2_CLONES float row_sum_exp(const float* x, int64_t cols, float m) {
  float lane[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += exp_approx(x[c + j] - m);
  float sum = 0;
  for (; c < cols; ++c) sum += exp_approx(x[c] - m);
  for (int64_t j = 0; j < kLanes; ++j) sum += lane[j];
  return sum;
}

// x[c] = scale exp(x[c] - l).
MEMOPT_AVX2_CLONES void scaled_exp_row(float* x, int64_t cols, float l, float scale) {
  for (int64_t c = 0; c < cols; ++c) x[c] = scale * exp_approx(x[c] - l);
}

}  // namespace

void cross_entropy_lse_block(const LogitsBlock& b, const int64_t* targets, int64_t ignore_index, float* running_max,
                             float* running_sum, float* target_logit) {
  for (int64_t r = 0; r < b.rows; ++r) {
    if (targets[r] == ignore_index) continue;
    const float* x = b.logits + r * b.row_stride;
    const float m = std::max(running_max[r], row_max(x, b.cols));
    const float sum = row_sum_exp(x, b.cols, m);  // Note [Lane reductions]
    // Note [Online log-sum-exp]: the sum so far rescaled to the new max (exp(-inf) = 0
    // on the first block).
    running_sum[r] = running_sum[r] * std::exp(running_max[r] - m) + sum;
    running_max[r] = m;
    const int64_t t = targets[r] - b.col0;
    if (t >= 0 && t < b.cols) target_logit[r] = x[t];
  }
}

void cross_entropy_finish(int64_t rows, const float* running_max, const float* running_sum,
                          const float* target_logit, const int64_t* targets, int64_t ignore_index, float* lse,
                          float* loss) {
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) {
      lse[r] = 0;
      loss[r] = 0;
      continue;
    }
    lse[r] = running_max[r] + std::log(running_sum[r]);
    loss[r] = lse[r] - target_logit[r];
  }
}

void cross_entropy_grad_block(float* logits, int64_t rows, int64_t cols, int64_t row_stride, int64_t col0,
                              const int64_t* targets, int64_t ignore_index, const float* lse, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* x = logits + r * row_stride;
    if (targets[r] == ignore_index) {
      std::fill(x, x + cols, 0.0f);
      continue;
    }
    const float l = lse[r];
    scaled_exp_row(x, cols, l, scale);
    const int64_t t = targets[r] - col0;
    if (t >= 0 && t < cols) x[t] -= scale;
  }
}

}  // namespace memopt::kernels::cpu

// cpu/cross_entropy.cpp: the CPU kernels of kernels/cross_entropy.h, row by row; each
// row's loops are plain enough for the compiler to vectorize.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memopt::kernels::cpu {

void cross_entropy_lse_block(const LogitsBlock& b, const int64_t* targets, int64_t ignore_index, float* running_max,
                             float* running_sum, float* target_logit) {
  for (int64_t r = 0; r < b.rows; ++r) {
    if (targets[r] == ignore_index) continue;
    const float* x = b.logits + r * b.row_stride;
    float block_max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < b.cols; ++c) block_max = std::max(block_max, x[c]);
    const float m = std::max(running_max[r], block_max);
    float sum = 0;
    for (int64_t c = 0; c < b.cols; ++c) sum += std::exp(x[c] - m);
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
    for (int64_t c = 0; c < cols; ++c) x[c] = scale * std::exp(x[c] - l);
    const int64_t t = targets[r] - col0;
    if (t >= 0 && t < cols) x[t] -= scale;
  }
}

}  // namespace memopt::kernels::cpu

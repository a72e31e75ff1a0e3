// cpu/reference.cpp: the references of cpu/reference.h.
#include "kernels/cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace memopt::kernels::reference {

Philox4x32 philox4x32_10(const uint32_t counter[4], const uint32_t key[2]) {
  uint32_t k0[10], k1[10];
  k0[0] = key[0];
  k1[0] = key[1];
  for (int r = 1; r < 10; ++r) {
    k0[r] = k0[r - 1] + 0x9E3779B9u;
    k1[r] = k1[r - 1] + 0xBB67AE85u;
  }
  uint32_t x0 = counter[0], x1 = counter[1], x2 = counter[2], x3 = counter[3];
  for (int r = 0; r < 10; ++r) {
    const uint64_t a = 0xD2511F53ull * x0, b = 0xCD9E8D57ull * x2;
    const uint32_t y0 = static_cast<uint32_t>(b >> 32) ^ x1 ^ k0[r];
    const uint32_t y1 = static_cast<uint32_t>(b & 0xFFFFFFFFu);
    const uint32_t y2 = static_cast<uint32_t>(a >> 32) ^ x3 ^ k1[r];
    const uint32_t y3 = static_cast<uint32_t>(a & 0xFFFFFFFFu);
    x0 = y0, x1 = y1, x2 = y2, x3 = y3;
  }
  return {{x0, x1, x2, x3}};
}

std::vector<uint8_t> dropout_mask(int64_t n, double p, DropoutKey key) {
  const long double threshold = std::floor(static_cast<long double>(static_cast<float>(p)) * 4294967296.0L + 0.5L);
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const uint64_t g = key.offset + static_cast<uint64_t>(e);
    const uint64_t block = g >> 2;
    const uint32_t counter[4] = {static_cast<uint32_t>(block & 0xFFFFFFFFu), static_cast<uint32_t>(block >> 32), 0, 0};
    const uint32_t k[2] = {static_cast<uint32_t>(key.seed & 0xFFFFFFFFu), static_cast<uint32_t>(key.seed >> 32)};
    const uint32_t word = philox4x32_10(counter, k).v[g & 3];
    mask[static_cast<size_t>(e)] = static_cast<long double>(word) >= threshold ? 1 : 0;
  }
  return mask;
}

double gelu_tanh(double z) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * z * (1.0 + std::tanh(k * (z + 0.044715 * z * z * z)));
}

double gelu_tanh_grad(double z) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (z + 0.044715 * z * z * z);
  const double sech2 = 1.0 / (std::cosh(u) * std::cosh(u));  // tanh' written as sech^2, not 1 - tanh^2
  return 0.5 * (1.0 + std::tanh(u)) + 0.5 * z * sech2 * k * (1.0 + 3.0 * 0.044715 * z * z);
}

void bias_gelu_forward(const float* h, const float* b, double* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = gelu_tanh(static_cast<double>(h[r * cols + c]) + static_cast<double>(b[c]));
}

void bias_gelu_backward(const float* dy, const float* h, const float* b, double* dh, double* db, int64_t rows,
                        int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) db[c] = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      dh[i] = static_cast<double>(dy[i]) * gelu_tanh_grad(static_cast<double>(h[i]) + static_cast<double>(b[c]));
      db[c] += dh[i];
    }
}

float round_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t down_bits = u & 0xFFFF0000u;  // toward zero
  const uint32_t up_bits = down_bits + 0x10000u; // away from zero (may reach inf)
  float down, up;
  std::memcpy(&down, &down_bits, sizeof down);
  std::memcpy(&up, &up_bits, sizeof up);
  const double dd = std::fabs(static_cast<double>(x) - down), du = std::fabs(static_cast<double>(up) - x);
  if (dd < du) return down;
  if (du < dd) return up;
  return ((down_bits >> 16) & 1u) == 0 ? down : up;
}

double cross_entropy_row(const float* logits, int64_t cols, int64_t target) {
  double m = logits[0];
  for (int64_t c = 1; c < cols; ++c) m = std::max(m, static_cast<double>(logits[c]));
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(logits[c]) - m);
  return m + std::log(sum) - static_cast<double>(logits[target]);
}

void cross_entropy_row_grad(const float* logits, int64_t cols, int64_t target, double* grad) {
  double m = logits[0];
  for (int64_t c = 1; c < cols; ++c) m = std::max(m, static_cast<double>(logits[c]));
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(logits[c]) - m);
  for (int64_t c = 0; c < cols; ++c) grad[c] = std::exp(static_cast<double>(logits[c]) - m) / sum;
  grad[target] -= 1.0;
}

}  // namespace memopt::kernels::reference

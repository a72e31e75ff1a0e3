// cpu/reference.h: plain, slow references for the kernels of this folder, written
// independently of them (no shared helper beyond the published constants), for the
// tests to compare the fast paths against (a plain reference beside every fast path).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dropout.h"

namespace memopt::kernels::reference {

// Philox4x32-10 straight from the paper: key schedule precomputed, one round
// function applied ten times.
Philox4x32 philox4x32_10(const uint32_t counter[4], const uint32_t key[2]);

// Element by element, each with its own Philox call (Note [Dropout counter mapping]);
// the threshold from p in long double.
std::vector<uint8_t> dropout_mask(int64_t n, double p, DropoutKey key);

// gelu_tanh(h + b) and its input gradient in double, with std::tanh.
double gelu_tanh(double z);
double gelu_tanh_grad(double z);
void bias_gelu_forward(const float* h, const float* b, double* y, int64_t rows, int64_t cols);
void bias_gelu_backward(const float* dy, const float* h, const float* b, double* dh, double* db, int64_t rows,
                        int64_t cols);

// One row's cross-entropy in double, its logits shifted by their max:
// log(sum exp(x)) - x[target], and its gradient softmax(x) - onehot(target).
double cross_entropy_row(const float* logits, int64_t cols, int64_t target);
void cross_entropy_row_grad(const float* logits, int64_t cols, int64_t target, double* grad);

// bfloat16 rounding by enumeration: the two bfloat16 neighbours of x, the nearer one,
// the even one on a tie. Finite x no larger in magnitude than
// the largest bfloat16 (0x7F7F0000, about 3.39e38).
float round_to_bf16(float x);

}  // namespace memopt::kernels::reference

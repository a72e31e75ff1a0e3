// bias_gelu.h: y = gelu_tanh(h + b) fused, with a backward that reads only the
// pre-activation h (and b). h is rows x cols row-major, b has cols entries: in GPT-2's
// MLP h = x W^T of c_fc and b its bias. GPT-2's "gelu_new" is the tanh form
//   gelu(z) = z/2 (1 + tanh(k (z + 0.044715 z^3))),  k = sqrt(2/pi).
// Written out op by op under autograd, it saves z, z^3, the tanh argument and the
// tanh; the fused backward recomputes them from h + b. Raw float32 pointers; no
// LibTorch, no CUDA header.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/exp_approx.h"
#include "kernels/philox.h"  // MEMOPT_HOST_DEVICE

namespace memopt::kernels {

inline constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluC = 0.044715f;

// Note [GELU through exp]
// 0.5 (1 + tanh(u)) = sigmoid(2u), so gelu(z) = z s with s = 1 / (1 + e), e = exp(-2u),
// and gelu'(z) = s + 2 z u'(z) s (1 - s) with 1 - s = e s (no cancellation). This
// needs one exp and one division per element: on the CPU, exp_approx (exp_approx.h) is plain
// arithmetic that the compiler vectorizes (libm's tanhf is a scalar call, about 30 ns
// an element here); CUDA uses its own expf. Both stay within a few float ulp of the
// double-precision reference (tests/kernels/bias_gelu_test.cpp).

// exp(-2u), the argument held to [-80, 80]: beyond, 1 / (1 + e) would be a float
// subnormal (slow on x86, and below 1e-34 anyway), and gelu's value there is below
// |z| e^-80 either way.
MEMOPT_HOST_DEVICE inline float gelu_exp_neg_2u(float z) {
  float x = -2.0f * kGeluK * (z + kGeluC * z * z * z);
  x = x > -80.0f ? x : -80.0f;
  x = x < 80.0f ? x : 80.0f;
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return exp_approx(x);
#endif
}

// Note [GELU through exp]: the one formula every implementation uses.
MEMOPT_HOST_DEVICE inline float gelu_tanh(float z) { return z * (1.0f / (1.0f + gelu_exp_neg_2u(z))); }
MEMOPT_HOST_DEVICE inline float gelu_tanh_grad(float z) {
  const float e = gelu_exp_neg_2u(z);
  const float s = 1.0f / (1.0f + e);
  return s + 2.0f * kGeluK * (1.0f + 3.0f * kGeluC * z * z) * z * s * (e * s);
}

namespace cpu {
// y[r, c] = gelu(h[r, c] + b[c]).
void bias_gelu_forward(const float* h, const float* b, float* y, int64_t rows, int64_t cols);
// dh[r, c] = dy[r, c] * gelu'(h[r, c] + b[c]);  db[c] = sum_r dh[r, c] (overwritten).
// db may be null when the bias needs no gradient. dh may alias dy.
void bias_gelu_backward(const float* dy, const float* h, const float* b, float* dh, float* db, int64_t rows,
                        int64_t cols);
}  // namespace cpu

namespace cuda {
// Device pointers, on `stream` (a cudaStream_t). MEMOPT_CUDA builds only.
void bias_gelu_forward(const float* h, const float* b, float* y, int64_t rows, int64_t cols, void* stream);
void bias_gelu_backward(const float* dy, const float* h, const float* b, float* dh, float* db, int64_t rows,
                        int64_t cols, void* stream);
}  // namespace cuda

}  // namespace memopt::kernels

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

#include "kernels/philox.h"  // MEMOPT_HOST_DEVICE

namespace memopt::kernels {

inline constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluC = 0.044715f;

// The one formula every implementation uses, in float, so CPU and CUDA agree up to
// their tanhf.
MEMOPT_HOST_DEVICE inline float gelu_tanh(float z) {
  return 0.5f * z * (1.0f + tanhf(kGeluK * (z + kGeluC * z * z * z)));
}
MEMOPT_HOST_DEVICE inline float gelu_tanh_grad(float z) {
  const float t = tanhf(kGeluK * (z + kGeluC * z * z * z));
  return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * z * z);
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

// exp_approx.h: exp in plain float arithmetic that the compiler vectorizes -- libm's
// expf is a scalar call -- for the CPU kernels (GELU, cross-entropy). No LibTorch, no
// CUDA header; CUDA kernels use their own expf.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/philox.h"  // MEMOPT_HOST_DEVICE

namespace memopt::kernels {

// exp(x) for x in [-87, 88] (clamped): x = n ln2 + r with |r| <= ln2/2 (ln2 split in
// two so n ln2 is exact), exp(r) by its degree-7 Taylor polynomial (truncation error
// <= r^8/8! < 6e-9, under float's 6e-8), 2^n by building the float's exponent bits.
MEMOPT_HOST_DEVICE inline float exp_approx(float x) {
  x = x > -87.0f ? x : -87.0f;  // two selects, not a branch: the loop stays vectorizable
  x = x < 88.0f ? x : 88.0f;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (exact for |x| < 2^22).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);  // compiles to a register move, in C++17 CUDA passes too
  return p * scale;
}

}  // namespace memopt::kernels

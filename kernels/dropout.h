// dropout.h: dropout that does not store its mask. Element e of a call keyed by
// (seed, offset) is kept iff the Philox4x32-10 word of global index g = offset + e is
// at least threshold(p); the backward recomputes the same words instead of reading a
// saved mask. Raw float32 pointers and sizes: no LibTorch, no CUDA header.
//
// Note [Dropout counter mapping]
// Global index g selects Philox block g / 4 and word g % 4 of it:
//   counter = {lo32(g / 4), hi32(g / 4), 0, 0},  key = {lo32(seed), hi32(seed)}.
// Every implementation (cpu/, cuda/, the reference) uses this one mapping, through
// dropout_keep(), so the CPU and a GPU draw the same mask for the same (seed, offset).
// A caller giving consecutive calls disjoint index ranges under one seed (offset +=
// numel, as PyTorch's CUDA generator advances its Philox offset) gets independent
// masks; a caller drawing a fresh seed per call may leave offset at 0.
#pragma once

#include <cstdint>

#include "kernels/philox.h"

namespace memopt::kernels {

struct DropoutKey {
  uint64_t seed = 0;
  uint64_t offset = 0;  // global index of the call's element 0
};

// Drop iff word < threshold: P(drop) = threshold / 2^32, which is p rounded to the
// nearest multiple of 2^-32. p must be in [0, 1).
MEMOPT_HOST_DEVICE inline uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0 + 0.5);
}

// The 1/(1 - p) kept elements are scaled by (inverted dropout, as torch does).
MEMOPT_HOST_DEVICE inline float dropout_scale(float p) { return 1.0f / (1.0f - p); }

MEMOPT_HOST_DEVICE inline Philox4x32 dropout_block(DropoutKey key, uint64_t block) {
  return philox4x32_10({{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}},
                       static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
}

// Whether element e of the call is kept (Note [Dropout counter mapping]).
MEMOPT_HOST_DEVICE inline bool dropout_keep(DropoutKey key, int64_t e, uint32_t threshold) {
  const uint64_t g = key.offset + static_cast<uint64_t>(e);
  return dropout_block(key, g / 4).v[g % 4] >= threshold;
}

namespace cpu {
// y = keep ? x * scale : 0. x and y may alias.
void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutKey key);
// dx = keep ? dy * scale : 0, the mask regenerated from the same key. dy, dx may alias.
void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutKey key);
// The mask itself (1 kept, 0 dropped), for tests and debugging.
void dropout_mask(uint8_t* mask, int64_t n, float p, DropoutKey key);
}  // namespace cpu

namespace cuda {
// The same on device pointers, enqueued on `stream` (a cudaStream_t; nullptr is the
// default stream). Defined only in MEMOPT_CUDA builds (kernels/cuda/dropout.cu).
void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutKey key, void* stream);
void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutKey key, void* stream);
}  // namespace cuda

}  // namespace memopt::kernels

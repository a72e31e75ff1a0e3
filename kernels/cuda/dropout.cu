// cuda/dropout.cu: the CUDA dropout of kernels/dropout.h. One thread per Philox block
// of four elements (Note [Dropout counter mapping]), grid-stride, so the mask is meant
// to equal the CPU's bit for bit; kernels/cpu/dropout.cpp is its tested twin. Compile-
// only: this kernel has never run on a GPU (its test skips without one).
#include "kernels/cuda/check.h"
#include "kernels/dropout.h"

namespace memopt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Block index q covers global indices [4q, 4q + 4) clipped to the call's range.
__global__ void dropout_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n, uint32_t threshold,
                               float scale, DropoutKey key) {
  const uint64_t first_block = key.offset / 4;
  const uint64_t last_block = (key.offset + static_cast<uint64_t>(n) + 3) / 4;  // exclusive
  const uint64_t num_blocks = last_block - first_block;
  for (uint64_t q = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; q < num_blocks;
       q += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t block = first_block + q;
    const Philox4x32 r = dropout_block(key, block);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint64_t g = block * 4 + j;
      if (g < key.offset) continue;
      const int64_t e = static_cast<int64_t>(g - key.offset);
      if (e >= n) break;
      out[e] = r.v[j] >= threshold ? in[e] * scale : 0.0f;
    }
  }
}

void launch(const float* in, float* out, int64_t n, float p, DropoutKey key, void* stream) {
  if (n <= 0) return;
  const int64_t blocks4 = (n + 3) / 4 + 1;
  dropout_kernel<<<grid_for(blocks4, kThreads), kThreads, 0, as_stream(stream)>>>(in, out, n, dropout_threshold(p),
                                                                                 dropout_scale(p), key);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutKey key, void* stream) {
  launch(x, y, n, p, key, stream);
}

// The backward is the forward applied to the gradient: same key, same mask.
void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutKey key, void* stream) {
  launch(dy, dx, n, p, key, stream);
}

}  // namespace memopt::kernels::cuda

// cuda/bias_gelu.cu: the CUDA fused bias + tanh-GELU of kernels/bias_gelu.h, using
// the header's gelu_tanh / gelu_tanh_grad so the formula is the CPU's
// (kernels/cpu/bias_gelu.cpp is its tested twin). The bias gradient is a column sum:
// one thread block per column tile, a shared-memory tree over rows.
#include "kernels/bias_gelu.h"
#include "kernels/cuda/check.h"

namespace memopt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void forward_kernel(const float* __restrict__ h, const float* __restrict__ b, float* __restrict__ y,
                               int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = gelu_tanh(h[i] + b[i % cols]);
}

__global__ void backward_kernel(const float* __restrict__ dy, const float* __restrict__ h,
                                const float* __restrict__ b, float* dh, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dh[i] = dy[i] * gelu_tanh_grad(h[i] + b[i % cols]);
}

// db[c] = sum_r dh[r, c]: a 32-column tile per block, 8 row lanes, then a tree.
constexpr int kColTile = 32, kRowLanes = 8;
__global__ void column_sum_kernel(const float* __restrict__ dh, float* __restrict__ db, int64_t rows, int64_t cols) {
  __shared__ float partial[kRowLanes][kColTile];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kColTile) + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) acc += dh[r * cols + c];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  for (int s = kRowLanes / 2; s > 0; s /= 2) {
    if (threadIdx.y < s) partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + s][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < cols) db[c] = partial[0][threadIdx.x];
}

}  // namespace

void bias_gelu_forward(const float* h, const float* b, float* y, int64_t rows, int64_t cols, void* stream) {
  if (rows * cols <= 0) return;
  forward_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, as_stream(stream)>>>(h, b, y, rows, cols);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
}

void bias_gelu_backward(const float* dy, const float* h, const float* b, float* dh, float* db, int64_t rows,
                        int64_t cols, void* stream) {
  if (rows * cols <= 0) return;
  backward_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, as_stream(stream)>>>(dy, h, b, dh, rows, cols);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
  if (db) {
    const dim3 block(kColTile, kRowLanes);
    const unsigned grid = static_cast<unsigned>((cols + kColTile - 1) / kColTile);
    column_sum_kernel<<<grid, block, 0, as_stream(stream)>>>(dh, db, rows, cols);
    MEMOPT_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace memopt::kernels::cuda

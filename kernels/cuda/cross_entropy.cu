// cuda/cross_entropy.cu: the CUDA kernels of kernels/cross_entropy.h. One thread block
// per row of a logits block: its threads stride over the columns and reduce the max and
// the sum in shared memory (Note [Online log-sum-exp]); kernels/cpu/cross_entropy.cpp
// is the tested twin. Compile-only: these kernels have never run on a GPU.
#include <cfloat>

#include "kernels/cross_entropy.h"
#include "kernels/cuda/check.h"

namespace memopt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename Op>
__device__ float block_reduce(float v, float* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const float out = shared[0];
  __syncthreads();
  return out;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Grid-stride over rows: block y handles rows y, y + gridDim.x, ...
__global__ void lse_block_kernel(LogitsBlock b, const int64_t* targets, int64_t ignore_index, float* running_max,
                                 float* running_sum, float* target_logit) {
  __shared__ float shared[kThreads];
  for (int64_t r = blockIdx.x; r < b.rows; r += gridDim.x) {
    if (targets[r] == ignore_index) continue;  // uniform across the block: no thread waits at a barrier alone
    const float* x = b.logits + r * b.row_stride;
    float local_max = -FLT_MAX;
    for (int64_t c = threadIdx.x; c < b.cols; c += blockDim.x) local_max = fmaxf(local_max, x[c]);
    const float m = fmaxf(running_max[r], block_reduce(local_max, shared, MaxOp{}));
    float local_sum = 0.0f;
    for (int64_t c = threadIdx.x; c < b.cols; c += blockDim.x) local_sum += expf(x[c] - m);
    const float sum = block_reduce(local_sum, shared, SumOp{});
    if (threadIdx.x == 0) {
      running_sum[r] = running_sum[r] * expf(running_max[r] - m) + sum;
      running_max[r] = m;
      const int64_t t = targets[r] - b.col0;
      if (t >= 0 && t < b.cols) target_logit[r] = x[t];
    }
  }
}

__global__ void finish_kernel(int64_t rows, const float* running_max, const float* running_sum,
                              const float* target_logit, const int64_t* targets, int64_t ignore_index, float* lse,
                              float* loss) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const bool ignored = targets[r] == ignore_index;
    lse[r] = ignored ? 0.0f : running_max[r] + logf(running_sum[r]);
    loss[r] = ignored ? 0.0f : lse[r] - target_logit[r];
  }
}

__global__ void grad_block_kernel(float* logits, int64_t rows, int64_t cols, int64_t row_stride, int64_t col0,
                                  const int64_t* targets, int64_t ignore_index, const float* lse,
                                  const float* scale_on_device) {
  const float scale = *scale_on_device;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* x = logits + r * row_stride;
    const bool ignored = targets[r] == ignore_index;
    const int64_t t = targets[r] - col0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      x[c] = ignored ? 0.0f : scale * (expf(x[c] - lse[r]) - (c == t ? 1.0f : 0.0f));
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < 65535 ? (rows > 0 ? rows : 1) : 65535); }

}  // namespace

void cross_entropy_lse_block(const LogitsBlock& block, const int64_t* targets, int64_t ignore_index,
                             float* running_max, float* running_sum, float* target_logit, void* stream) {
  if (block.rows <= 0 || block.cols <= 0) return;
  lse_block_kernel<<<row_grid(block.rows), kThreads, 0, as_stream(stream)>>>(block, targets, ignore_index, running_max,
                                                                             running_sum, target_logit);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_finish(int64_t rows, const float* running_max, const float* running_sum,
                          const float* target_logit, const int64_t* targets, int64_t ignore_index, float* lse,
                          float* loss, void* stream) {
  if (rows <= 0) return;
  finish_kernel<<<grid_for(rows, kThreads), kThreads, 0, as_stream(stream)>>>(rows, running_max, running_sum,
                                                                              target_logit, targets, ignore_index, lse,
                                                                              loss);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_grad_block(float* logits, int64_t rows, int64_t cols, int64_t row_stride, int64_t col0,
                              const int64_t* targets, int64_t ignore_index, const float* lse, const float* scale,
                              void* stream) {
  if (rows <= 0 || cols <= 0) return;
  grad_block_kernel<<<row_grid(rows), kThreads, 0, as_stream(stream)>>>(logits, rows, cols, row_stride, col0, targets,
                                                                        ignore_index, lse, scale);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace memopt::kernels::cuda

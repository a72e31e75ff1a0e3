// cross_entropy.h: the elementwise half of a cross-entropy whose logits are never
// held for every row at once. A caller computes the logits of a chunk of rows one
// vocabulary block at a time (logits = hidden_chunk . W_block^T: the matmuls are the
// caller's, at::mm or cuBLAS); these kernels fold each block into a running
// log-sum-exp per row, and later turn a recomputed block into its gradient in place.
// Raw float32 pointers and sizes: no LibTorch, no CUDA header.
//
// Note [Online log-sum-exp]
// For a row seen in blocks, keep m = the largest logit so far and s = sum exp(x - m)
// over the logits so far. A block with largest logit b gives m' = max(m, b) and
// s' = s exp(m - m') + sum over the block of exp(x - m'); after the last block
// lse = m + log s (Milakov and Gimelshein, "Online normalizer calculation for
// softmax", 2018). Start with m = -infinity, s = 0. One pass over each block, and
// exp never overflows: every exponent is <= 0.
//
// Note [Chunked cross-entropy gradient]
// d loss_r / d logit_rc = scale_r (softmax_rc - [c == target_r]), with softmax_rc =
// exp(logit_rc - lse_r): so the backward needs only lse (one float per row) besides
// the logits, which it recomputes block by block from the hidden rows and the weight
// rather than storing them (B x T x V floats). The cost is one more logits matmul
// per chunk in the backward; the saving is the whole logits tensor.
// The other way -- turning each block into its gradient during the forward, as
// Liger's fused linear cross-entropy does -- saves that matmul, but the weight's
// V x C gradient must then outlive the forward (as large as the weight) or be added
// into .grad by the forward itself. memopt's schedules run forwards without a
// backward (no-grad passes before a recomputation), and pipelines seed the backward
// with a micro-batch scale rather than 1, so a forward that writes gradients would be
// wrong or would hold V x C floats; the recomputation is always right and holds one
// block.
#pragma once

#include <cstdint>

namespace memopt::kernels {

// One block of logits: rows x cols floats, row r at logits + r * row_stride,
// holding vocabulary columns [col0, col0 + cols). targets[r] is row r's class, or
// ignore_index for a row that takes no part in the loss.
struct LogitsBlock {
  const float* logits = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
  int64_t col0 = 0;
};

namespace cpu {
// Folds a block into each row's running max and sum (Note [Online log-sum-exp]) and,
// when the row's target falls in the block, records its logit. Ignored rows are
// left untouched.
void cross_entropy_lse_block(const LogitsBlock& block, const int64_t* targets, int64_t ignore_index,
                             float* running_max, float* running_sum, float* target_logit);
// lse[r] = running_max + log(running_sum); loss[r] = lse[r] - target_logit[r], 0
// (and lse 0) for ignored rows.
void cross_entropy_finish(int64_t rows, const float* running_max, const float* running_sum,
                          const float* target_logit, const int64_t* targets, int64_t ignore_index, float* lse,
                          float* loss);
// In place: logits[r, c] := scale * (exp(logits[r, c] - lse[r]) - [col0 + c == target[r]]),
// 0 for ignored rows (Note [Chunked cross-entropy gradient]). `logits` is the block's,
// writable.
void cross_entropy_grad_block(float* logits, int64_t rows, int64_t cols, int64_t row_stride, int64_t col0,
                              const int64_t* targets, int64_t ignore_index, const float* lse, float scale);
}  // namespace cpu

namespace cuda {
// The same on device pointers, enqueued on `stream` (a cudaStream_t; nullptr is the
// default stream). Defined only in MEMOPT_CUDA builds (kernels/cuda/cross_entropy.cu).
void cross_entropy_lse_block(const LogitsBlock& block, const int64_t* targets, int64_t ignore_index,
                             float* running_max, float* running_sum, float* target_logit, void* stream);
void cross_entropy_finish(int64_t rows, const float* running_max, const float* running_sum,
                          const float* target_logit, const int64_t* targets, int64_t ignore_index, float* lse,
                          float* loss, void* stream);
// Note [The loss scale stays on the device]: `scale` points to one float on the
// device, the loss's incoming gradient over the target count, which a backward
// computes on the device; reading it on the host would wait for the whole step.
void cross_entropy_grad_block(float* logits, int64_t rows, int64_t cols, int64_t row_stride, int64_t col0,
                              const int64_t* targets, int64_t ignore_index, const float* lse, const float* scale,
                              void* stream);
}  // namespace cuda

}  // namespace memopt::kernels

// kernel_ops.h: kernels/ as LibTorch ops -- at::Tensor in and out, with custom
// autograd Functions whose backward reads what the kernel needs and nothing else.
// The kernels themselves stay plain C++ (no LibTorch) so their tests build fast;
// this thin adapter lives in runtime/ because runtime/ is where LibTorch lives.
// CPU float32 tensors; anything else is refused with a message naming the fix.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "kernels/dropout.h"
#include "kernels/pack.h"

namespace memopt::model {

// Note [Dropout key from the global generator]
// Each call draws its Philox seed (one 64-bit word) from the default CPU generator
// and uses offset 0 (kernels/dropout.h, Note [Dropout counter mapping]). So the
// executor's RNG restoration (Note [Recompute RNG]) gives a recomputed forward the
// same key, hence the same mask, while the autograd node keeps only the key: no
// mask is saved. (On a GPU the key would come from the CUDA generator's Philox seed
// and offset, advanced by numel per call.)
kernels::DropoutKey draw_dropout_key();

// Inverted dropout with probability p; the identity (the input itself, no kernel)
// when p == 0 or not training, as ATen's. Backward regenerates the mask.
at::Tensor philox_dropout(const at::Tensor& x, double p, bool training);
// The same with an explicit key (tests, reproducing a mask).
at::Tensor philox_dropout(const at::Tensor& x, double p, kernels::DropoutKey key);

// gelu_tanh(h + bias) over the last dimension; saves only h (and the bias, a
// parameter), from which backward recomputes everything.
at::Tensor bias_gelu(const at::Tensor& h, const at::Tensor& bias);

// Note [Chunked linear cross-entropy]
// The mean over rows whose target is not `ignore_index` of cross_entropy(hidden .
// weight^T, targets) -- hidden [..., C] (N rows), weight V x C (GPT-2's tied wte),
// targets [...] int64 -- without ever holding the N x V logits: they are made
// `chunk_rows` x `vocab_block` at a time by at::mm and folded into each row's
// log-sum-exp by kernels/cross_entropy.h. Forward keeps one float per row (the
// log-sum-exp) besides its inputs; backward recomputes each block's logits and turns
// them into the gradient in place (Note [Chunked cross-entropy gradient]), so its
// transients are one block of logits plus the hidden state's gradient; the weight's
// goes into weight.grad when that exists (Note [Gradients into .grad]). With no row
// left the loss is NaN, as ATen's mean is.
at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                        int64_t chunk_rows, int64_t vocab_block, int64_t ignore_index = -100);

// Note [Gradients into .grad]
// A V x C weight's gradient is as large as the weight: 147 MiB for GPT-2's tied wte,
// more than all the saved activations of GPT-2 small at B=1, T=256. Returned to
// autograd, it is a new tensor that AccumulateGrad then adds into .grad, so it is a
// transient of the backward that no schedule can avoid. memopt's trainers keep every
// .grad allocated and zero it in place between steps, so the two ops below add their
// weight gradient straight into weight.grad, block by block, and return none for the
// weight (Megatron-LM's gradient-accumulation fusion does the same for its linear
// layers). When weight.grad does not exist yet (a first step, ZeRO-2/3's released
// gradients), is not a contiguous float tensor like the weight, or the backward
// builds a graph (create_graph), they return the gradient as autograd expects.
// Either way .grad ends up holding the same sum; hooks on the weight's gradient do
// not see the in-place part.

// at::embedding(weight, ids), whose backward adds the rows' gradients into
// weight.grad (Note [Gradients into .grad]) instead of scattering them into a new,
// zeroed V x C tensor (embedding_dense_backward).
at::Tensor embedding_into_grad(const at::Tensor& weight, const at::Tensor& ids);

// A group of tensors in one contiguous uint8 buffer (kernels/pack.h): one transfer
// instead of one per tensor. format Bf16Lossy is lossy for float32 tensors.
struct PackedTensors {
  at::Tensor buffer;  // uint8, layout.total_bytes
  kernels::PackLayout layout;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<at::ScalarType> dtypes;
};
// Contiguous copies of non-contiguous inputs are made first; any dtype, CPU only.
PackedTensors pack_tensors(const std::vector<at::Tensor>& tensors,
                           kernels::PackFormat format = kernels::PackFormat::Exact);
std::vector<at::Tensor> unpack_tensors(const PackedTensors& packed);

}  // namespace memopt::model

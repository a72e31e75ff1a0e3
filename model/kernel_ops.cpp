// kernel_ops.cpp: the autograd Functions and pack adapters of kernel_ops.h.
#include "model/kernel_ops.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/bias_gelu.h"
#include "kernels/cross_entropy.h"

// Note [Kernel device dispatch]: CUDA tensors go to kernels::cuda on the current
// stream, CPU tensors to kernels::cpu. This is the file's only #if; the dropout key is
// drawn from the CPU generator on either device, so the executor's RNG restoration
// (Note [Recompute RNG]) makes a recomputation regenerate the same mask on a GPU too.
#if MEMOPT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace memopt::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

#if MEMOPT_WITH_CUDA
constexpr bool kWithCuda = true;
void* cuda_stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
namespace device_kernels = kernels::cuda;
#else
// A CPU-only build has no kernels::cuda; check_float refuses CUDA tensors before any
// of these could be reached.
constexpr bool kWithCuda = false;
[[noreturn]] void no_cuda() { throw std::logic_error("memopt: built without the CUDA backend"); }
void* cuda_stream_of(const at::Tensor&) { no_cuda(); }
namespace device_kernels {
void dropout_forward(const float*, float*, int64_t, float, kernels::DropoutKey, void*) { no_cuda(); }
void dropout_backward(const float*, float*, int64_t, float, kernels::DropoutKey, void*) { no_cuda(); }
void bias_gelu_forward(const float*, const float*, float*, int64_t, int64_t, void*) { no_cuda(); }
void bias_gelu_backward(const float*, const float*, const float*, float*, float*, int64_t, int64_t, void*) { no_cuda(); }
void cross_entropy_lse_block(const kernels::LogitsBlock&, const int64_t*, int64_t, float*, float*, float*, void*) {
  no_cuda();
}
void cross_entropy_finish(int64_t, const float*, const float*, const float*, const int64_t*, int64_t, float*, float*,
                          void*) {
  no_cuda();
}
void cross_entropy_grad_block(float*, int64_t, int64_t, int64_t, int64_t, const int64_t*, int64_t, const float*,
                              const float*, void*) {
  no_cuda();
}
}  // namespace device_kernels
#endif

void check_float(const at::Tensor& t, const char* op, const char* what) {
  const bool device_ok = t.device().is_cpu() || (kWithCuda && t.device().is_cuda());
  if (!device_ok || t.scalar_type() != at::kFloat)
    throw std::invalid_argument(std::string(op) + ": " + what + " is " + t.toString() + "; memopt's kernels take float32 " +
                                (kWithCuda ? "CPU or CUDA" : "CPU (this build has no CUDA backend)") +
                                " tensors (use --kernels aten otherwise)");
}

// Note [Gradients into .grad] in kernel_ops.h: weight.grad, when the backward may add
// into it; an undefined tensor when it must return the gradient instead.
at::Tensor grad_to_add_into(const at::Tensor& weight) {
  const at::Tensor& g = weight.grad();
  if (!g.defined() || at::GradMode::is_enabled() || !g.is_contiguous() || g.sizes() != weight.sizes() ||
      g.scalar_type() != weight.scalar_type() || g.device() != weight.device())
    return at::Tensor();
  return g;
}

int64_t as_int64(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t as_uint64(int64_t v) { return static_cast<uint64_t>(v); }

struct PhiloxDropoutFunction : torch::autograd::Function<PhiloxDropoutFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p, int64_t seed, int64_t offset) {
    check_float(x, "philox_dropout", "the input");
    const at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty_like(xc);
    const kernels::DropoutKey key{as_uint64(seed), as_uint64(offset)};
    if (xc.is_cuda())
      device_kernels::dropout_forward(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(),
                                     static_cast<float>(p), key, cuda_stream_of(xc));
    else
      kernels::cpu::dropout_forward(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(),
                                    static_cast<float>(p), key);
    // The key, not the mask: three scalars are all backward needs.
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["offset"] = offset;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(dy);
    const float p = static_cast<float>(ctx->saved_data["p"].toDouble());
    const kernels::DropoutKey key{as_uint64(ctx->saved_data["seed"].toInt()),
                                  as_uint64(ctx->saved_data["offset"].toInt())};
    if (dy.is_cuda())
      device_kernels::dropout_backward(dy.const_data_ptr<float>(), dx.mutable_data_ptr<float>(), dy.numel(), p, key,
                                      cuda_stream_of(dy));
    else
      kernels::cpu::dropout_backward(dy.const_data_ptr<float>(), dx.mutable_data_ptr<float>(), dy.numel(), p, key);
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct BiasGeluFunction : torch::autograd::Function<BiasGeluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& bias) {
    check_float(h, "bias_gelu", "the pre-activation");
    check_float(bias, "bias_gelu", "the bias");
    const int64_t cols = bias.numel();
    if (h.dim() < 1 || h.size(-1) != cols)
      throw std::invalid_argument("bias_gelu: pre-activation " + std::to_string(h.dim()) + "-d with last size " +
                                  std::to_string(h.dim() ? h.size(-1) : 0) + " does not match the bias' " +
                                  std::to_string(cols) + " entries");
    const at::Tensor hc = h.contiguous(), bc = bias.contiguous();
    at::Tensor y = at::empty_like(hc);
    if (hc.device() != bc.device())
      throw std::invalid_argument("bias_gelu: the pre-activation is on " + hc.device().str() + ", the bias on " +
                                  bc.device().str());
    if (hc.is_cuda())
      device_kernels::bias_gelu_forward(hc.const_data_ptr<float>(), bc.const_data_ptr<float>(),
                                       y.mutable_data_ptr<float>(), hc.numel() / cols, cols, cuda_stream_of(hc));
    else
      kernels::cpu::bias_gelu_forward(hc.const_data_ptr<float>(), bc.const_data_ptr<float>(),
                                      y.mutable_data_ptr<float>(), hc.numel() / cols, cols);
    ctx->save_for_backward({hc, bc});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &b = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t cols = b.numel();
    at::Tensor dh = at::empty_like(h);
    at::Tensor db = ctx->needs_input_grad(1) ? at::empty_like(b) : at::Tensor();
    float* db_ptr = db.defined() ? db.mutable_data_ptr<float>() : nullptr;
    if (h.is_cuda())
      device_kernels::bias_gelu_backward(dy.const_data_ptr<float>(), h.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                        dh.mutable_data_ptr<float>(), db_ptr, h.numel() / cols, cols, cuda_stream_of(h));
    else
      kernels::cpu::bias_gelu_backward(dy.const_data_ptr<float>(), h.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                       dh.mutable_data_ptr<float>(), db_ptr, h.numel() / cols, cols);
    return {dh, db};
  }
};

// Note [Chunked linear cross-entropy] in kernel_ops.h.
struct ChunkedLinearCrossEntropyFunction : torch::autograd::Function<ChunkedLinearCrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t ignore_index, int64_t chunk_rows, int64_t vocab_block) {
    check_float(hidden, "chunked_linear_cross_entropy", "the hidden state");
    check_float(weight, "chunked_linear_cross_entropy", "the weight");
    const int64_t C = weight.size(1), V = weight.size(0);
    if (weight.dim() != 2 || hidden.size(-1) != C || targets.numel() * C != hidden.numel() ||
        targets.scalar_type() != at::kLong || targets.device() != hidden.device() || weight.device() != hidden.device())
      throw std::invalid_argument("chunked_linear_cross_entropy: expects hidden [..., C], weight V x C and int64 "
                                  "targets [...] on one device; got hidden " + hidden.toString() + " " +
                                  std::to_string(hidden.numel()) + " elements, weight " + weight.toString() +
                                  ", targets " + targets.toString() + " " + std::to_string(targets.numel()));
    if (chunk_rows < 1 || vocab_block < 1)
      throw std::invalid_argument("chunked_linear_cross_entropy: chunk_rows and vocab_block must be positive");
    const at::Tensor h = hidden.reshape({-1, C}).contiguous(), t = targets.reshape({-1}).contiguous();
    const at::Tensor w = weight.contiguous();
    const int64_t N = h.size(0);
    at::Tensor lse = at::empty({N}, h.options()), row_loss = at::empty({N}, h.options());
    {
      at::Tensor m = at::full({N}, -std::numeric_limits<float>::infinity(), h.options());
      at::Tensor s = at::zeros({N}, h.options()), target_logit = at::zeros({N}, h.options());
      for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
        const int64_t n = std::min(chunk_rows, N - r0);
        const at::Tensor hc = h.narrow(0, r0, n);
        for (int64_t c0 = 0; c0 < V; c0 += vocab_block) {
          const int64_t k = std::min(vocab_block, V - c0);
          const at::Tensor logits = at::mm(hc, w.narrow(0, c0, k).t());  // n x k, the only logits held
          const kernels::LogitsBlock b{logits.const_data_ptr<float>(), n, k, k, c0};
          const int64_t* tp = t.const_data_ptr<int64_t>() + r0;
          float *mp = m.mutable_data_ptr<float>() + r0, *sp = s.mutable_data_ptr<float>() + r0,
                *tl = target_logit.mutable_data_ptr<float>() + r0;
          if (h.is_cuda()) device_kernels::cross_entropy_lse_block(b, tp, ignore_index, mp, sp, tl, cuda_stream_of(h));
          else kernels::cpu::cross_entropy_lse_block(b, tp, ignore_index, mp, sp, tl);
        }
      }
      if (h.is_cuda())
        device_kernels::cross_entropy_finish(N, m.const_data_ptr<float>(), s.const_data_ptr<float>(),
                                            target_logit.const_data_ptr<float>(), t.const_data_ptr<int64_t>(),
                                            ignore_index, lse.mutable_data_ptr<float>(),
                                            row_loss.mutable_data_ptr<float>(), cuda_stream_of(h));
      else
        kernels::cpu::cross_entropy_finish(N, m.const_data_ptr<float>(), s.const_data_ptr<float>(),
                                           target_logit.const_data_ptr<float>(), t.const_data_ptr<int64_t>(),
                                           ignore_index, lse.mutable_data_ptr<float>(),
                                           row_loss.mutable_data_ptr<float>());
    }
    const at::Tensor count = (t != ignore_index).sum().to(h.scalar_type());
    // The weight is kept by reference, not saved: a saved tensor may come back from a
    // saved-tensor hook as another tensor over the same bytes, without the
    // parameter's .grad (Note [Gradients into .grad]).
    ctx->saved_data["weight"] = weight;
    ctx->save_for_backward({h, t, lse, count});
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["chunk_rows"] = chunk_rows;
    ctx->saved_data["vocab_block"] = vocab_block;
    ctx->saved_data["hidden_sizes"] = hidden.sizes().vec();
    return row_loss.sum() / count;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &t = saved[1], &lse = saved[2], &count = saved[3];
    const at::Tensor weight = ctx->saved_data["weight"].toTensor(), w = weight.contiguous();
    const int64_t ignore_index = ctx->saved_data["ignore_index"].toInt();
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt(), vocab_block = ctx->saved_data["vocab_block"].toInt();
    const int64_t N = h.size(0), V = w.size(0);
    // d loss / d logit = (grad / count) (softmax - onehot): one scalar for every row,
    // read on the host only on the CPU (Note [The loss scale stays on the device]).
    at::Tensor scale_t;
    float scale = 0.0f;
    if (h.is_cuda()) scale_t = (grads[0] / count).to(at::kFloat).contiguous();
    else scale = (grads[0] / count).item<float>();
    const at::Tensor into = ctx->needs_input_grad(1) ? grad_to_add_into(weight) : at::Tensor();
    at::Tensor dh = at::zeros_like(h), dw = into;
    if (!dw.defined() && ctx->needs_input_grad(1)) dw = at::zeros_like(w);
    for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, N - r0);
      const at::Tensor hc = h.narrow(0, r0, n);
      at::Tensor dhc = dh.narrow(0, r0, n);
      for (int64_t c0 = 0; c0 < V; c0 += vocab_block) {
        const int64_t k = std::min(vocab_block, V - c0);
        const at::Tensor wb = w.narrow(0, c0, k);
        at::Tensor logits = at::mm(hc, wb.t());  // recomputed, then its gradient in place
        const int64_t* tp = t.const_data_ptr<int64_t>() + r0;
        const float* lp = lse.const_data_ptr<float>() + r0;
        if (h.is_cuda())
          device_kernels::cross_entropy_grad_block(logits.mutable_data_ptr<float>(), n, k, k, c0, tp, ignore_index, lp,
                                                  scale_t.const_data_ptr<float>(), cuda_stream_of(h));
        else
          kernels::cpu::cross_entropy_grad_block(logits.mutable_data_ptr<float>(), n, k, k, c0, tp, ignore_index, lp,
                                                 scale);
        dhc.addmm_(logits, wb);
        if (dw.defined()) dw.narrow(0, c0, k).addmm_(logits.t(), hc);
      }
    }
    const std::vector<int64_t> sizes = ctx->saved_data["hidden_sizes"].toIntVector();
    return {dh.view(sizes), into.defined() ? at::Tensor() : dw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Note [Gradients into .grad] in kernel_ops.h.
struct EmbeddingIntoGradFunction : torch::autograd::Function<EmbeddingIntoGradFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& ids) {
    ctx->saved_data["weight"] = weight;  // by reference, as the chunked loss keeps it
    ctx->save_for_backward({ids});
    return at::embedding(weight, ids);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor weight = ctx->saved_data["weight"].toTensor(), ids = ctx->get_saved_variables()[0];
    const at::Tensor into = grad_to_add_into(weight);
    if (!into.defined())
      return {at::embedding_backward(grads[0], ids, weight.size(0), -1, false, false), at::Tensor()};
    into.index_add_(0, ids.reshape({-1}), grads[0].reshape({-1, weight.size(1)}));
    return {at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                        int64_t chunk_rows, int64_t vocab_block, int64_t ignore_index) {
  return ChunkedLinearCrossEntropyFunction::apply(hidden, weight, targets, ignore_index, chunk_rows, vocab_block);
}

at::Tensor embedding_into_grad(const at::Tensor& weight, const at::Tensor& ids) {
  return EmbeddingIntoGradFunction::apply(weight, ids);
}

kernels::DropoutKey draw_dropout_key() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return {at::check_generator<at::CPUGeneratorImpl>(gen)->random64(), 0};
}

at::Tensor philox_dropout(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  return philox_dropout(x, p, draw_dropout_key());
}

at::Tensor philox_dropout(const at::Tensor& x, double p, kernels::DropoutKey key) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("philox_dropout: p " + std::to_string(p) + " is outside [0, 1)");
  return PhiloxDropoutFunction::apply(x, p, as_int64(key.seed), as_int64(key.offset));
}

at::Tensor bias_gelu(const at::Tensor& h, const at::Tensor& bias) { return BiasGeluFunction::apply(h, bias); }

PackedTensors pack_tensors(const std::vector<at::Tensor>& tensors, kernels::PackFormat format) {
  PackedTensors packed;
  std::vector<kernels::PackItem> items;
  std::vector<at::Tensor> contiguous;
  for (const at::Tensor& t : tensors) {
    if (!t.device().is_cpu())
      throw std::invalid_argument("pack_tensors: " + t.toString() + " is not on the CPU; kernels/cuda packs device tensors");
    contiguous.push_back(t.contiguous());
    items.push_back({t.numel(), static_cast<int64_t>(t.element_size()), t.scalar_type() == at::kFloat});
    packed.shapes.push_back(t.sizes().vec());
    packed.dtypes.push_back(t.scalar_type());
  }
  packed.layout = kernels::pack_layout(items, format);
  packed.buffer = at::empty({packed.layout.total_bytes}, at::kByte);
  std::vector<const void*> srcs;
  for (const at::Tensor& t : contiguous) srcs.push_back(t.const_data_ptr());
  kernels::cpu::pack(packed.layout, srcs, reinterpret_cast<std::byte*>(packed.buffer.mutable_data_ptr<uint8_t>()));
  return packed;
}

std::vector<at::Tensor> unpack_tensors(const PackedTensors& packed) {
  std::vector<at::Tensor> out;
  std::vector<void*> dsts;
  for (size_t i = 0; i < packed.shapes.size(); ++i) {
    out.push_back(at::empty(packed.shapes[i], packed.dtypes[i]));
    dsts.push_back(out.back().mutable_data_ptr());
  }
  kernels::cpu::unpack(packed.layout, reinterpret_cast<const std::byte*>(packed.buffer.const_data_ptr<uint8_t>()),
                       dsts);
  return out;
}

}  // namespace memopt::model

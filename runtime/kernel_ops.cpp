// kernel_ops.cpp: the autograd Functions and pack adapters of kernel_ops.h.
#include "runtime/kernel_ops.h"

#include <mutex>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/bias_gelu.h"

namespace memopt::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_cpu_float(const at::Tensor& t, const char* op, const char* what) {
  if (!t.device().is_cpu() || t.scalar_type() != at::kFloat)
    throw std::invalid_argument(std::string(op) + ": " + what + " is " + t.toString() +
                                "; memopt's kernels take float32 CPU tensors (use --kernels aten otherwise)");
}

int64_t as_int64(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t as_uint64(int64_t v) { return static_cast<uint64_t>(v); }

struct PhiloxDropoutFunction : torch::autograd::Function<PhiloxDropoutFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p, int64_t seed, int64_t offset) {
    check_cpu_float(x, "philox_dropout", "the input");
    const at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty_like(xc);
    kernels::cpu::dropout_forward(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(),
                                  static_cast<float>(p), {as_uint64(seed), as_uint64(offset)});
    // The key, not the mask: three scalars are all backward needs.
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["offset"] = offset;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(dy);
    kernels::cpu::dropout_backward(dy.const_data_ptr<float>(), dx.mutable_data_ptr<float>(), dy.numel(),
                                   static_cast<float>(ctx->saved_data["p"].toDouble()),
                                   {as_uint64(ctx->saved_data["seed"].toInt()),
                                    as_uint64(ctx->saved_data["offset"].toInt())});
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct BiasGeluFunction : torch::autograd::Function<BiasGeluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& bias) {
    check_cpu_float(h, "bias_gelu", "the pre-activation");
    check_cpu_float(bias, "bias_gelu", "the bias");
    const int64_t cols = bias.numel();
    if (h.dim() < 1 || h.size(-1) != cols)
      throw std::invalid_argument("bias_gelu: pre-activation " + std::to_string(h.dim()) + "-d with last size " +
                                  std::to_string(h.dim() ? h.size(-1) : 0) + " does not match the bias' " +
                                  std::to_string(cols) + " entries");
    const at::Tensor hc = h.contiguous(), bc = bias.contiguous();
    at::Tensor y = at::empty_like(hc);
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
    kernels::cpu::bias_gelu_backward(dy.const_data_ptr<float>(), h.const_data_ptr<float>(), b.const_data_ptr<float>(),
                                     dh.mutable_data_ptr<float>(), db.defined() ? db.mutable_data_ptr<float>() : nullptr,
                                     h.numel() / cols, cols);
    return {dh, db};
  }
};

}  // namespace

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

}  // namespace memopt::runtime

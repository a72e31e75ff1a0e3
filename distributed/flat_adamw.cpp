// flat_adamw.cpp: torch::optim::AdamW::step's arithmetic for one flat tensor.
#include "distributed/flat_adamw.h"

#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>

namespace memopt::distributed {

FlatAdamW::FlatAdamW(int64_t numel, const AdamWConfig& config)
    : config_(config), exp_avg_(at::zeros({numel})), exp_avg_sq_(at::zeros({numel})) {}

int64_t FlatAdamW::state_bytes() const {
  return static_cast<int64_t>(exp_avg_.nbytes() + exp_avg_sq_.nbytes());
}

void FlatAdamW::step(at::Tensor& param, const at::Tensor& grad) {
  if (param.numel() != exp_avg_.numel() || grad.numel() != exp_avg_.numel())
    throw std::invalid_argument("FlatAdamW::step: partition sizes differ from the optimizer state");
  ++step_;
  const AdamWConfig& c = config_;
  // Decoupled weight decay first, as torch does.
  param.mul_(1 - c.lr * c.weight_decay);
  exp_avg_.mul_(c.beta1).add_(grad, 1 - c.beta1);
  exp_avg_sq_.mul_(c.beta2).addcmul_(grad, grad, 1 - c.beta2);
  const double bias_correction1 = 1 - std::pow(c.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1 - std::pow(c.beta2, static_cast<double>(step_));
  const at::Tensor denom = (exp_avg_sq_.sqrt() / std::sqrt(bias_correction2)).add_(c.eps);
  param.addcdiv_(exp_avg_, denom, -c.lr / bias_correction1);
}

}  // namespace memopt::distributed

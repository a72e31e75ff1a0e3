// flat_adamw.h: AdamW (Loshchilov & Hutter 2019) on one flat fp32 partition -- the
// update each ZeRO rank applies to the elements it owns. Same arithmetic, in the
// same order, as torch::optim::AdamW (tests/distributed/flat_adamw_test.cpp compares).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace memopt::distributed {

struct AdamWConfig {
  // torch::optim::AdamWOptions' defaults.
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class FlatAdamW {
 public:
  // State (m, v) for `numel` elements, allocated now: it is part of the static bytes.
  FlatAdamW(int64_t numel, const AdamWConfig& config);
  // One step on `param` (updated in place) from `grad`; both 1-D, `numel` elements.
  void step(at::Tensor& param, const at::Tensor& grad);
  int64_t steps_taken() const { return step_; }
  int64_t state_bytes() const;

 private:
  AdamWConfig config_;
  at::Tensor exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace memopt::distributed

// runtime_fixture.h: the tiny GPT-2 (dropout on, B=2, T=64) with its measured profile
// and an AdamW training loop along a schedule -- shared by the memory-check and
// determinism tests.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <vector>

#include "measure/cpu_allocator.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"
#include "runtime/train_step.h"

namespace memopt::runtime::testing {

struct TinyTrainer {
  gpt2::Gpt2Spec spec;
  model::Gpt2 gpt2{nullptr};
  std::unique_ptr<model::StagedModel> model;
  model::Batch batch;
  std::unique_ptr<torch::optim::AdamW> optimizer;

  TinyTrainer() {
    spec.config = gpt2::gpt2_preset("tiny")->config;
    spec.workload = gpt2::gpt2_preset("tiny")->workload;
    spec.config.set_dropout(0.1);
    spec.workload.batch = 2;
    spec.workload.seq_len = 64;
    gpt2 = model::make_gpt2(spec);  // weights from spec.seed: two trainers start identical
    model = std::make_unique<model::StagedModel>(model::stage_gpt2(gpt2));
    batch = model::make_gpt2_batch(spec);
    optimizer = std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(1e-3));
    model->train(true);
  }

  solver::Profile profile() const {
    profiler::ProfileOptions options;
    options.repeat = 1;
    return profiler::profile_cpu(*model, batch, gpt2::gpt2_spec_to_json(spec), options);
  }

  // One training step along `ops`: loss.
  double step(const std::vector<solver::Op>& ops, const ExecutorOptions& options = {}) {
    measure::CpuMemoryMeter meter;
    zero_grads_in_place(*model);
    const double loss = run_scheduled_step(*model, ops, batch, meter, options).loss;
    optimizer->step();
    return loss;
  }

  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  }

  // AdamW's moments and step counts, in parameter order.
  std::vector<at::Tensor> optimizer_state() const {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : model->parameters()) {
      const auto it = optimizer->state().find(p.unsafeGetTensorImpl());
      if (it == optimizer->state().end()) continue;
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      out.push_back(s.exp_avg().clone());
      out.push_back(s.exp_avg_sq().clone());
      out.push_back(at::scalar_tensor(static_cast<double>(s.step()), at::kDouble));
    }
    return out;
  }
};

// Bit-for-bit equality of two tensor lists (same shapes, same bytes).
inline bool identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].sizes().equals(b[i].sizes()) || !at::equal(a[i], b[i])) return false;
  return true;
}

}  // namespace memopt::runtime::testing

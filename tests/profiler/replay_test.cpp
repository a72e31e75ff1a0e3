// replay_test.cpp: the point of Note [Stage byte accounting] -- run schedules for
// real (a minimal executor of the ops of docs/formats.md, "Operations and memory without offload:
// the sequential simulator", on the counting allocator) and
// check that the peak they reach is the peak the simulator predicts from the
// profile. The runtime's executor must reach the same numbers; this test
// pins down what the profile promises it.
#include <map>

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "measure/cpu_allocator.h"
#include "model/gpt2.h"
#include "profiler/profiler.h"
#include "solver/dp/baselines.h"
#include "solver/chain/simulate.h"

namespace memopt::profiler {
namespace {

using solver::Op;
using solver::OpKind;

// The least an executor does: a_k plain tensors, ā_k as (detached input, output
// with its graph), d_k gradients; ops add and remove them as docs/formats.md, "Operations and
// memory without offload: the sequential simulator" says.
class MiniExecutor {
 public:
  MiniExecutor(const model::StagedModel& model, const model::Batch& batch) : model_(model), batch_(batch) {}

  void run(const Op& op) {
    const int i = op.index;
    switch (op.kind) {
      case OpKind::FwdKeep: {
        at::Tensor x = input_of(i).detach();
        if (i > 0) x.requires_grad_(true);
        at::Tensor y = model_.forward_stage(i, x, batch_);
        kept_[i + 1] = {x, y};
        break;
      }
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop: {
        at::NoGradGuard no_grad;
        plain_[i + 1] = model_.forward_stage(i, input_of(i), batch_);
        if (op.kind == OpKind::FwdDrop) plain_.erase(i);
        break;
      }
      case OpKind::Loss: {
        const int L = model_.num_stages();
        grad_[L] = at::ones_like(kept_.count(L) ? kept_[L].y : plain_.at(L));
        plain_.erase(L);
        break;
      }
      case OpKind::Bwd: {
        Kept& k = kept_.at(i + 1);
        k.y.backward(grad_.at(i + 1));
        if (i > 0) grad_[i] = k.x.grad();
        kept_.erase(i + 1);
        grad_.erase(i + 1);
        plain_.erase(i);
        break;
      }
      default:
        FAIL() << "the mini executor does not offload";
    }
  }

 private:
  struct Kept {
    at::Tensor x, y;
  };
  at::Tensor input_of(int i) {
    if (i == 0) return batch_.input;
    if (plain_.count(i)) return plain_[i];
    return kept_.at(i).y;
  }
  const model::StagedModel& model_;
  const model::Batch& batch_;
  std::map<int, at::Tensor> plain_;
  std::map<int, Kept> kept_;
  std::map<int, at::Tensor> grad_;
};

// The peak of docs/formats.md, "Operations and memory without offload: the sequential simulator",
// but with the forward tmp split by mode: fwd_keep peaks at
// resident + the tmp under autograd, fwd_ckpt/fwd_drop at resident + the tmp
// without grad. (fwd_tmp_bytes alone is one ftmp: the max of the two.)
int64_t two_tmp_peak(const solver::Chain& chain, const std::vector<StageDetail>& details, const std::vector<Op>& ops) {
  std::map<int, int64_t> plain{{0, chain.x(0)}}, kept, grad;
  auto resident = [&] {
    int64_t r = 0;
    for (const auto* m : {&plain, &kept, &grad})
      for (const auto& [k, bytes] : *m) r += bytes;
    return r;
  };
  int64_t peak = 0;
  const int L = chain.length();
  for (const Op& op : ops) {
    const int i = op.index;
    switch (op.kind) {
      case OpKind::FwdKeep:
        kept[i + 1] = chain.xbar(i + 1);
        peak = std::max(peak, resident() + details[i].fwd_tmp_grad_bytes);
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        plain[i + 1] = chain.x(i + 1);
        peak = std::max(peak, resident() + details[i].fwd_tmp_nograd_bytes);
        if (op.kind == OpKind::FwdDrop) plain.erase(i);
        break;
      case OpKind::Loss:
        grad[L] = chain.x(L);
        peak = std::max(peak, resident() + chain.btmp(L));
        plain.erase(L);
        break;
      case OpKind::Bwd:
        grad[i] = chain.x(i);
        peak = std::max(peak, resident() + chain.btmp(i));
        grad.erase(i + 1);
        kept.erase(i + 1);
        plain.erase(i);
        break;
      default:
        break;
    }
  }
  return peak;
}

struct ReplayCase {
  gpt2::Granularity granularity;
  gpt2::Attention attention;
  double dropout;
};

class ReplayTest : public ::testing::TestWithParam<ReplayCase> {};

TEST_P(ReplayTest, MeasuredPeakMatchesTheSimulatorsPrediction) {
  gpt2::Gpt2Spec spec;  // the tiny preset's shape, two layers: a few hundred ms
  spec.config.n_layer = 2;
  spec.config.granularity = GetParam().granularity;
  spec.config.attention = GetParam().attention;
  spec.config.set_dropout(GetParam().dropout);
  spec.workload = {2, 128};
  model::StagedModel model = model::stage_gpt2(model::make_gpt2(spec));
  const model::Batch batch = model::make_gpt2_batch(spec);
  ProfileOptions options;
  options.repeat = 1;
  // The same thread count for profile and replay: kernels size per-thread scratch
  // by it (the CPU flash kernel does).
  const int threads = at::get_num_threads();
  at::set_num_threads(options.threads);
  measure::CpuMemoryMeter meter;
  measure::CpuTimer timer;
  const Measurement m = measure_chain(model, batch, meter, timer, options);
  const solver::Chain& chain = m.chain;

  // Gradients allocated before the baseline, as Note [Stage byte accounting] asks.
  for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::zeros_like(p);
  model.train(true);
  const std::map<std::string, std::vector<Op>> schedules = {
      {"store_all", solver::store_all_ops(chain)},
      {"recompute_all", solver::recompute_all_ops(chain)},
      {"recompute_blocks", solver::recompute_blocks_ops(chain)},
      {"sqrt", solver::sqrt_ops(chain)},
  };
  for (const auto& [name, ops] : schedules) {
    SCOPED_TRACE(name);
    const solver::SimResult predicted = solver::simulate_sequential(chain, ops);
    ASSERT_TRUE(predicted.valid) << predicted.error;
    const int64_t baseline = meter.current_bytes();
    meter.reset_peak();
    {
      MiniExecutor executor(model, batch);
      for (const Op& op : ops) executor.run(op);
    }
    // The budget counts a_0, which existed before the baseline.
    const int64_t measured = meter.peak_bytes() - baseline + chain.input_bytes;
    EXPECT_EQ(meter.current_bytes(), baseline) << "the step leaked activations";
    // The simulator never predicts less than what happens (the profile measures
    // everything), but with one ftmp per stage it over-predicts fwd_keep peaks: Note
    // [One forward tmp is not enough] in profiler.h. measured/predicted here goes
    // down to 0.73 for recompute_all with dropout; store_all is exact.
    EXPECT_LE(measured, predicted.peak_bytes);
    // With the forward tmp split by mode the prediction is exact, to the byte.
    EXPECT_EQ(measured, two_tmp_peak(chain, m.details, ops));
  }
  at::set_num_threads(threads);
}

INSTANTIATE_TEST_SUITE_P(
    Gpt2, ReplayTest,
    ::testing::Values(ReplayCase{gpt2::Granularity::Block, gpt2::Attention::Explicit, 0.1},
                      ReplayCase{gpt2::Granularity::Sublayer, gpt2::Attention::Explicit, 0.1},
                      ReplayCase{gpt2::Granularity::Block, gpt2::Attention::Sdpa, 0.0},
                      ReplayCase{gpt2::Granularity::Sublayer, gpt2::Attention::Sdpa, 0.1}),
    [](const auto& info) {
      return std::string(gpt2::granularity_word(info.param.granularity)) + "_" +
             gpt2::attention_word(info.param.attention) + (info.param.dropout > 0 ? "_dropout" : "");
    });

}  // namespace
}  // namespace memopt::profiler

// head_loss_bench.cpp: GPT-2's head stage -- ln_f, the tied lm_head and the loss --
// forward and backward, with ATen's loss and with the chunked one (Note [Loss choice]),
// at GPT-2 small's width and vocabulary (C = 768, V = 50,257), B = 1, one thread.
//   BM_HeadStage/loss/T    loss 0 = aten, 1 = chunked
// Each iteration is one training step's share of the head: forward with grad, then
// backward into gradients kept allocated and zeroed between iterations (as memopt's
// trainers keep them; the zeroing is not timed). Tensors come from memopt's caching
// testbed allocator, as in every measured step (Note [A caching testbed allocator]):
// with c10's default one, ATen's loss would pay page faults for its N x V and V x C
// temporaries every iteration, which no GPU does. Run with repetitions interleaved at
// random so that the two losses share the machine's state:
//   build/tests/bench/head_loss_bench --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "measure/cpu_allocator.h"
#include "model/gpt2.h"

namespace {

using memopt::gpt2::Loss;

void BM_HeadStage(benchmark::State& state) {
  memopt::measure::counting_cpu_allocator();  // installed once, before any tensor
  at::set_num_threads(1);
  memopt::gpt2::Gpt2Config c;
  c.n_layer = 1;
  c.n_embd = 768;
  c.n_head = 12;
  c.vocab_size = 50257;
  c.n_positions = 1024;
  c.set_dropout(0.0);
  c.loss = state.range(0) == 0 ? Loss::Aten : Loss::Chunked;
  const int64_t T = state.range(1);
  memopt::model::Gpt2 model(c, 1);
  model->train();
  for (auto& p : model->parameters()) p.mutable_grad() = at::zeros_like(p);
  const at::Tensor targets = at::randint(c.vocab_size, {1, T}, at::kLong);
  const at::Tensor x0 = at::randn({1, T, c.n_embd});
  for (auto _ : state) {
    const at::Tensor x = x0.detach().requires_grad_(true);
    model->head_loss(x, targets).backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
    state.PauseTiming();
    for (auto& p : model->parameters()) p.mutable_grad().zero_();
    state.ResumeTiming();
  }
  state.SetLabel(c.loss == Loss::Aten ? "aten" : "chunked");
}

BENCHMARK(BM_HeadStage)->ArgsProduct({{0, 1}, {256, 1024}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

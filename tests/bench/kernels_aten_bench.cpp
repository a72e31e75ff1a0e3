// kernels_aten_bench.cpp: ATen's CPU kernels that memopt's replace, on the shapes of
// kernels_bench.cpp and one thread, so the two binaries' numbers compare directly:
//   BM_AtenNativeDropout/n        native_dropout, p = 0.1 (bool mask + output)
//   BM_AtenDropoutBackward/n      native_dropout_backward(grad, mask, scale)
//   BM_AtenAddGelu/rows/cols      gelu(h + b, "tanh") (the bias add is separate here;
//                                 in GPT-2's aten path addmm adds it)
//   BM_AtenGeluBackward/rows/cols gelu_backward(dy, z, "tanh") + dy.sum(0) for db
// Run:  build/tests/bench/kernels_aten_bench --benchmark_out=kernels_aten_bench.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace {

void one_thread() { at::set_num_threads(1); }

void BM_AtenNativeDropout(benchmark::State& state) {
  one_thread();
  const at::Tensor x = at::randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(at::native_dropout(x, 0.1, true));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}

void BM_AtenDropoutBackward(benchmark::State& state) {
  one_thread();
  const at::Tensor x = at::randn({state.range(0)});
  const at::Tensor mask = std::get<1>(at::native_dropout(x, 0.1, true));
  for (auto _ : state) benchmark::DoNotOptimize(at::native_dropout_backward(x, mask, 1.0 / 0.9));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 8);
}

void BM_AtenAddGelu(benchmark::State& state) {
  one_thread();
  const at::Tensor h = 3 * at::randn({state.range(0), state.range(1)}), b = at::randn({state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(at::gelu(h + b, "tanh"));
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 8);
}

void BM_AtenGeluBackward(benchmark::State& state) {
  one_thread();
  const at::Tensor z = 3 * at::randn({state.range(0), state.range(1)}), dy = at::randn_like(z);
  for (auto _ : state) {
    const at::Tensor dz = at::gelu_backward(dy, z, "tanh");
    benchmark::DoNotOptimize(dz.sum(0));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 12);
}

BENCHMARK(BM_AtenNativeDropout)->Arg(1 << 16)->Arg(1 << 18)->Arg(8192 * 768);
BENCHMARK(BM_AtenDropoutBackward)->Arg(1 << 16)->Arg(1 << 18)->Arg(8192 * 768);
BENCHMARK(BM_AtenAddGelu)->Args({512, 512})->Args({8192, 3072});
BENCHMARK(BM_AtenGeluBackward)->Args({512, 512})->Args({8192, 3072});

}  // namespace

BENCHMARK_MAIN();

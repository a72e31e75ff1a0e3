// kernels_bench.cpp: Google Benchmark timings of the CPU kernels of kernels/ on one
// thread, at GPT-2 shapes (tiny: N = B*T = 512 rows, C = 128; small: N = 8192, C = 768).
//
//   BM_DropoutForward/n, BM_DropoutBackward/n   mask-free Philox dropout, p = 0.1
//   BM_DropoutReferenceMask/n                   the per-element reference, for scale
//   BM_BiasGeluForward/rows/cols, ...Backward    fused bias + tanh-GELU (cols = 4C)
//   BM_PackExact/n/k, BM_PackBf16/n/k            k float32 tensors of n elements into one
//   BM_MemcpyEach/n/k                            the same bytes as k separate copies
// Bytes per second count the bytes read and written.
// Run:  build/tests/bench/kernels_bench --benchmark_out=kernels_bench.json --benchmark_out_format=json
// ATen's own kernels on the same shapes: build/tests/bench/kernels_aten_bench; both in
// one process, interleaved (what results/ reports): build/tests/bench/kernels_compare_bench.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/bias_gelu.h"
#include "kernels/cpu/reference.h"
#include "kernels/dropout.h"
#include "kernels/pack.h"

namespace memopt::kernels {
namespace {

std::vector<float> random_floats(int64_t n, float stddev = 1.0f) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

void BM_DropoutForward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> x = random_floats(n);
  std::vector<float> y(x.size());
  uint64_t seed = 0;
  for (auto _ : state) {
    cpu::dropout_forward(x.data(), y.data(), n, 0.1f, {++seed, 0});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 8);
}

void BM_DropoutBackward(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> dy = random_floats(n);
  std::vector<float> dx(dy.size());
  for (auto _ : state) {
    cpu::dropout_backward(dy.data(), dx.data(), n, 0.1f, {7, 0});
    benchmark::DoNotOptimize(dx.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 8);
}

void BM_DropoutReferenceMask(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) benchmark::DoNotOptimize(reference::dropout_mask(n, 0.1, {7, 0}));
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_BiasGeluForward(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const std::vector<float> h = random_floats(rows * cols, 3.0f), b = random_floats(cols);
  std::vector<float> y(h.size());
  for (auto _ : state) {
    cpu::bias_gelu_forward(h.data(), b.data(), y.data(), rows, cols);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 8);
}

void BM_BiasGeluBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const std::vector<float> h = random_floats(rows * cols, 3.0f), b = random_floats(cols), dy = random_floats(rows * cols);
  std::vector<float> dh(h.size()), db(b.size());
  for (auto _ : state) {
    cpu::bias_gelu_backward(dy.data(), h.data(), b.data(), dh.data(), db.data(), rows, cols);
    benchmark::DoNotOptimize(dh.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 12);
}

struct PackCase {
  std::vector<std::vector<float>> tensors;
  std::vector<const void*> srcs;
  std::vector<PackItem> items;
  explicit PackCase(benchmark::State& state) {
    const int64_t n = state.range(0), k = state.range(1);
    for (int64_t i = 0; i < k; ++i) {
      tensors.push_back(random_floats(n));
      srcs.push_back(tensors.back().data());
      items.push_back({n, 4, true});
    }
  }
};

void bench_pack(benchmark::State& state, PackFormat format) {
  PackCase c(state);
  const PackLayout layout = pack_layout(c.items, format);
  std::vector<std::byte> buf(static_cast<size_t>(layout.total_bytes));
  for (auto _ : state) {
    cpu::pack(layout, c.srcs, buf.data());
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 4);
}
void BM_PackExact(benchmark::State& state) { bench_pack(state, PackFormat::Exact); }
void BM_PackBf16(benchmark::State& state) { bench_pack(state, PackFormat::Bf16Lossy); }

void BM_MemcpyEach(benchmark::State& state) {
  PackCase c(state);
  std::vector<std::vector<float>> dsts(c.tensors.size(), std::vector<float>(static_cast<size_t>(state.range(0))));
  for (auto _ : state) {
    for (size_t i = 0; i < dsts.size(); ++i) std::memcpy(dsts[i].data(), c.srcs[i], dsts[i].size() * 4);
    benchmark::DoNotOptimize(dsts.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1) * 4);
}

// n: tiny's residual N*C = 65536, tiny's attention B*H*T*T = 262144, small's N*C.
BENCHMARK(BM_DropoutForward)->Arg(1 << 16)->Arg(1 << 18)->Arg(8192 * 768);
BENCHMARK(BM_DropoutBackward)->Arg(1 << 16)->Arg(1 << 18)->Arg(8192 * 768);
BENCHMARK(BM_DropoutReferenceMask)->Arg(1 << 16);
BENCHMARK(BM_BiasGeluForward)->Args({512, 512})->Args({8192, 3072});
BENCHMARK(BM_BiasGeluBackward)->Args({512, 512})->Args({8192, 3072});
BENCHMARK(BM_PackExact)->Args({1 << 16, 8})->Args({1 << 20, 8});
BENCHMARK(BM_PackBf16)->Args({1 << 16, 8})->Args({1 << 20, 8});
BENCHMARK(BM_MemcpyEach)->Args({1 << 16, 8})->Args({1 << 20, 8});

}  // namespace
}  // namespace memopt::kernels

// kernels_compare_bench links this file beside kernels_aten_bench.cpp, whose main runs
// both sets in one process.
#ifndef MEMOPT_BENCH_NO_MAIN
BENCHMARK_MAIN();
#endif

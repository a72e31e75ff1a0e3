// copy_link_bench.cpp: the CPU copy engine's emulated link -- requested rate against
// the rate each direction achieves -- from 1 MB/s to uncapped memcpy speed. Each
// transfer lasts about 20 ms at the requested rate (64 MiB uncapped).
//   BM_CappedLink/rate_mb_per_s   (0: uncapped) counters: requested_bytes_per_s,
//                                 d2h_bytes_per_s, h2d_bytes_per_s (medians of the
//                                 iterations) and their quartiles (*_q25_*, *_q75_*)
// Run:  build/tests/bench/copy_link_bench --benchmark_out=copy_link_bench.json --benchmark_out_format=json
// Plot: .venv/bin/python tools/plot_link.py copy_link_bench.json --out DIR
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/stats.h"
#include "measure/cpu_allocator.h"
#include "runtime/copy_engine.h"

namespace {

void BM_CappedLink(benchmark::State& state) {
  // The testbed's device allocator, as `memopt run` has it: a prefetch's device
  // tensor comes from its cache, not from freshly faulted pages.
  memopt::measure::counting_cpu_allocator();
  const double rate = static_cast<double>(state.range(0)) * 1e6;
  const int64_t num_bytes = rate > 0 ? std::max<int64_t>(64 << 10, static_cast<int64_t>(rate * 0.02) / 64 * 64)
                                     : int64_t{64} << 20;
  std::vector<double> d2h, h2d;
  for (auto _ : state) {
    const memopt::runtime::LinkBandwidth bw = memopt::runtime::measure_copy_bandwidth(rate, rate, num_bytes, 3);
    d2h.push_back(bw.d2h_bytes_per_s);
    h2d.push_back(bw.h2d_bytes_per_s);
  }
  state.counters["requested_bytes_per_s"] = rate;
  state.counters["transfer_bytes"] = static_cast<double>(num_bytes);
  state.counters["d2h_bytes_per_s"] = memopt::common::median(d2h);
  state.counters["h2d_bytes_per_s"] = memopt::common::median(h2d);
  state.counters["d2h_q25_bytes_per_s"] = memopt::common::quantile(d2h, 0.25);
  state.counters["d2h_q75_bytes_per_s"] = memopt::common::quantile(d2h, 0.75);
  state.counters["h2d_q25_bytes_per_s"] = memopt::common::quantile(h2d, 0.25);
  state.counters["h2d_q75_bytes_per_s"] = memopt::common::quantile(h2d, 0.75);
}
BENCHMARK(BM_CappedLink)
    ->Arg(1)->Arg(5)->Arg(20)->Arg(50)->Arg(200)->Arg(1000)->Arg(5000)->Arg(20000)->Arg(0)
    ->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

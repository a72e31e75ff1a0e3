// link_check.cpp: rounds of copies through one engine, timed by the copies' own clocks.
#include "runtime/link_check.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "measure/backend.h"
#include "runtime/copy_engine.h"
#include "runtime/host_arena.h"

namespace memopt::runtime {
namespace {

double rate(int64_t num_bytes, const Transfer& t) { return static_cast<double>(num_bytes) / (t.copy_ms() / 1000.0); }

nlohmann::ordered_json spread_json(const common::Spread& s) {
  return {{"median", s.median}, {"q25", s.q25}, {"q75", s.q75}};
}

}  // namespace

LinkCheck check_link(const LinkCheckOptions& o) {
  if (o.num_bytes < 4 || o.repeat < 1 || o.matmul_size < 1 || o.num_matmuls < 1)
    throw std::invalid_argument("link check: needs at least 4 bytes, 1 round, 1 product of size 1");
  const measure::Backend backend = o.device.is_cuda() ? measure::Backend::Cuda : measure::Backend::Cpu;
  const std::unique_ptr<measure::Timer> timer = measure::make_timer(backend);
  // Two copies out and one back are in flight at most: A and B on the host, B back.
  const int64_t n = o.num_bytes / 4;
  auto engine = make_copy_engine(o.device, {o.d2h_cap_bytes_per_s, o.h2d_cap_bytes_per_s,
                                            HostArena::bytes_for(std::vector<int64_t>{4 * n, 4 * n})});
  const at::TensorOptions floats = at::TensorOptions(at::kFloat).device(o.device);
  const at::Tensor a = at::ones({n}, floats), b = at::full({n}, 2.0f, floats);
  const at::Tensor x = at::randn({o.matmul_size, o.matmul_size}, floats);
  const auto compute = [&] {
    at::Tensor y = x;
    for (int k = 0; k < o.num_matmuls; ++k) y = at::matmul(y, x).div_(static_cast<double>(o.matmul_size));
    return y;
  };
  // Both directions at once: A goes out while B, already out, comes back; `beside`
  // runs after both copies are queued (a copy waits for the compute queued before it,
  // whose bytes it moves, not for what comes after) and is timed. Returns its ms.
  struct Rates {
    std::vector<double> d2h, h2d;
  };
  const auto both_at_once = [&](Rates& rates, bool measured, const std::function<void()>& beside) {
    auto earlier = engine->offload(b);
    earlier->wait();
    timer->start();
    auto out = engine->offload(a);
    auto back = engine->prefetch(earlier);
    beside();
    const double ms = timer->stop_ms();
    out->wait();
    back->take_device_tensor();
    back->wait();
    if (measured) {
      rates.d2h.push_back(rate(o.num_bytes, *out));
      rates.h2d.push_back(rate(o.num_bytes, *back));
    }
    engine->finish_step();
    return ms;
  };
  Rates alone, duplex, busy;
  std::vector<double> compute_alone, compute_busy;
  for (int round = 0; round <= o.repeat; ++round) {
    const bool measured = round > 0;  // round 0 warms the engine, the pool and the kernels
    {  // each direction alone
      auto out = engine->offload(a);
      out->wait();
      auto back = engine->prefetch(out);
      back->take_device_tensor();
      back->wait();
      if (measured) {
        alone.d2h.push_back(rate(o.num_bytes, *out));
        alone.h2d.push_back(rate(o.num_bytes, *back));
      }
      engine->finish_step();
    }
    both_at_once(duplex, measured, [] {});
    timer->start();
    compute();
    const double alone_ms = timer->stop_ms();
    const double beside_ms = both_at_once(busy, measured, [&] { compute(); });
    if (measured) {
      compute_alone.push_back(alone_ms);
      compute_busy.push_back(beside_ms);
    }
  }
  return {common::spread(alone.d2h),  common::spread(alone.h2d), common::spread(duplex.d2h),
          common::spread(duplex.h2d), common::spread(busy.d2h),  common::spread(busy.h2d),
          common::spread(compute_alone), common::spread(compute_busy)};
}

nlohmann::ordered_json link_check_json(const LinkCheckOptions& o, const LinkCheck& c) {
  return {{"device", o.device.str()},
          {"bytes", o.num_bytes},
          {"repeat", o.repeat},
          {"matmul_size", o.matmul_size},
          {"num_matmuls", o.num_matmuls},
          {"d2h_alone_bytes_per_s", spread_json(c.d2h_alone)},
          {"h2d_alone_bytes_per_s", spread_json(c.h2d_alone)},
          {"d2h_duplex_bytes_per_s", spread_json(c.d2h_duplex)},
          {"h2d_duplex_bytes_per_s", spread_json(c.h2d_duplex)},
          {"d2h_under_compute_bytes_per_s", spread_json(c.d2h_under_compute)},
          {"h2d_under_compute_bytes_per_s", spread_json(c.h2d_under_compute)},
          {"compute_alone_ms", spread_json(c.compute_alone_ms)},
          {"compute_beside_copies_ms", spread_json(c.compute_beside_copies_ms)}};
}

}  // namespace memopt::runtime

// cmd_link.cpp: `memopt link` -- what the copy engine achieves on this device: each
// direction alone, both at once, and both beside matrix products (runtime/link_check.h).
//   memopt link --device cuda --bytes 256MiB --repeat 10 --out link.json
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "measure/backend.h"
#include "runtime/link_check.h"
#include "solver/io/json_printer.h"
#include "solver/chain/units.h"
#include "tools/commands.h"

namespace memopt::tools {
namespace {

struct LinkArgs {
  std::string device = "cpu";
  std::string bytes = "64MiB";
  std::string link = "measured";  // the CPU engine's emulated rate
  int repeat = 5;
  int64_t matmul_size = 0;  // 0: 4096 on a GPU, 512 on the CPU
  int num_matmuls = 8;
  std::string out_path;
};

void run_link(const LinkArgs& args) {
  const measure::Backend backend = measure::parse_backend(args.device);
  measure::require_backend(backend);
  const bool on_cuda = backend == measure::Backend::Cuda;
  runtime::LinkCheckOptions o;
  o.device = measure::backend_device(backend);
  try {
    o.num_bytes = solver::parse_bytes(args.bytes);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--bytes: ") + e.what());
  }
  if (args.link != "measured") {
    if (on_cuda) throw std::invalid_argument("--link: a CUDA device's link is measured, not emulated; drop --link");
    try {
      o.d2h_cap_bytes_per_s = o.h2d_cap_bytes_per_s = solver::parse_bandwidth(args.link);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("--link: ") + e.what() + "; or `measured` for the uncapped engine");
    }
  }
  o.repeat = args.repeat;
  o.matmul_size = args.matmul_size > 0 ? args.matmul_size : on_cuda ? 4096 : 512;
  o.num_matmuls = args.num_matmuls;
  const runtime::LinkCheck c = runtime::check_link(o);
  std::printf("copy engine on %s, %s per copy, median (IQR) of %d rounds\n", o.device.str().c_str(),
              solver::format_bytes(o.num_bytes).c_str(), o.repeat);
  const auto row = [](const char* what, const common::Spread& d2h, const common::Spread& h2d) {
    std::printf("  %-22s d2h %9s (%s-%s)   h2d %9s (%s-%s)\n", what, solver::format_bandwidth(d2h.median).c_str(),
                solver::format_bandwidth(d2h.q25).c_str(), solver::format_bandwidth(d2h.q75).c_str(),
                solver::format_bandwidth(h2d.median).c_str(), solver::format_bandwidth(h2d.q25).c_str(),
                solver::format_bandwidth(h2d.q75).c_str());
  };
  row("alone", c.d2h_alone, c.h2d_alone);
  row("both at once", c.d2h_duplex, c.h2d_duplex);
  row("both beside compute", c.d2h_under_compute, c.h2d_under_compute);
  std::printf("  compute (%d products of %lld x %lld): %.3f ms alone (%.3f-%.3f), %.3f ms beside the copies "
              "(%.3f-%.3f)\n",
              o.num_matmuls, static_cast<long long>(o.matmul_size), static_cast<long long>(o.matmul_size),
              c.compute_alone_ms.median, c.compute_alone_ms.q25, c.compute_alone_ms.q75,
              c.compute_beside_copies_ms.median, c.compute_beside_copies_ms.q25, c.compute_beside_copies_ms.q75);
  if (!args.out_path.empty()) {
    solver::write_json_atomic(args.out_path, runtime::link_check_json(o, c));
    std::printf("wrote %s\n", args.out_path.c_str());
  }
}

}  // namespace

void add_link_command(CLI::App& app) {
  auto args = std::make_shared<LinkArgs>();
  CLI::App* cmd = app.add_subcommand("link", "Measure the copy engine: each direction alone, both at once, and beside compute");
  cmd->add_option("--device", args->device, "cpu|cuda (cuda needs the `cuda` build and a GPU)")->capture_default_str();
  cmd->add_option("--bytes", args->bytes, "bytes per copy")->capture_default_str();
  cmd->add_option("--link", args->link, "the CPU engine's emulated rate, e.g. 16GB/s; `measured` copies uncapped")
      ->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "measured rounds, after one warm-up round")->capture_default_str();
  cmd->add_option("--matmul-size", args->matmul_size, "n of the n x n products beside the copies (default 4096 on cuda, 512 on cpu)");
  cmd->add_option("--matmuls", args->num_matmuls, "products per round")->capture_default_str();
  cmd->add_option("--out", args->out_path, "write the numbers as JSON");
  cmd->callback([args] { run_link(*args); });
}

}  // namespace memopt::tools

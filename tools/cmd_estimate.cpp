// cmd_estimate.cpp: `memopt estimate` -- a MODELED profile of GPT-2 on a GPU this
// machine does not have (gpt2/estimate.h), and with --fit-chart the report of
// how large a batch or sequence fits with each strategy (report/fit_chart.h).
//   memopt estimate --model gpt2 --preset xl --gpu h100-80gb --batch 8 --seq 1024 --dtype bf16 --out xl.json
//   memopt estimate --preset small --gpu v100-16gb --batch 8 --seq 1024 --dtype fp16 --fit-chart --out-dir DIR
#include <cstdio>
#include <memory>
#include <string>

#include "gpt2/estimate.h"
#include "gpt2/spec_choices.h"
#include "report/fit_chart.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/io/json_printer.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/gpt2_flags.h"

namespace memopt::tools {
using namespace memopt::report;

namespace {

struct EstimateArgs {
  gpt2::Gpt2Choices choices;  // --preset small unless given; gpt2/spec_choices.h
  std::string gpu, dtype = "fp32";
  std::string out_path, out_dir, reserve = "1GiB";
  bool fit_chart = false, no_plot = false;
  double max_overhead = 0.10;
  int slots = 500, threads = 0;
  std::string command;  // as invoked, recorded in the profile and the report
};

gpt2::EstimateOptions options_from_args(const EstimateArgs& a) {
  gpt2::Gpt2Choices choices = a.choices;
  choices.grow_positions = true;  // Note [Growing the position table]
  const gpt2::Gpt2Spec spec = gpt2::build_gpt2_spec(choices, gpt2_flag);
  const auto gpu = gpt2::gpu_spec(a.gpu);
  if (!gpu) throw std::invalid_argument("--gpu: unknown GPU '" + a.gpu + "'; known GPUs: " + gpt2::gpu_words());
  const auto dtype = gpt2::dtype_from_word(a.dtype);
  if (!dtype) throw std::invalid_argument("--dtype: '" + a.dtype + "' is not fp32, fp16 or bf16");
  gpt2::peak_flop_per_s(*gpu, *dtype);  // throws for bf16 on a V100
  return {spec.config, spec.workload, *gpu, *dtype, spec.preset, a.command};
}

void run_estimate(const EstimateArgs& args) {
  using solver::format_bytes;
  if (args.out_path.empty() && !args.fit_chart) throw std::invalid_argument("give --out P.json, --fit-chart, or both");
  if (args.fit_chart && args.out_dir.empty()) throw std::invalid_argument("--fit-chart needs --out-dir DIR");
  const gpt2::EstimateOptions o = options_from_args(args);
  const gpt2::Estimate est = gpt2::estimate_gpt2(o);
  const solver::Chain& chain = est.profile.chain;
  const int64_t store_all_peak = solver::store_all_peak_bytes(chain);
  std::printf("MODELED (not measured): gpt2 %s on %s, %s, B=%lld, T=%lld, %d stages\n", o.preset.c_str(),
              std::string(o.gpu.name).c_str(), args.dtype.c_str(), static_cast<long long>(o.workload.batch),
              static_cast<long long>(o.workload.seq_len), chain.length());
  std::printf("  store-all activation peak %s, static %s, GPU memory %s\n", format_bytes(store_all_peak).c_str(),
              format_bytes(est.profile.static_bytes).c_str(), format_bytes(o.gpu.memory_bytes).c_str());
  std::printf("  one step (roofline, forward + 2x backward) %.2f ms; link %s at %.3g bytes/s\n",
              solver::sum_fwd_bwd_ms(chain), std::string(gpt2::gpu_link(o.gpu).name).c_str(), gpt2::gpu_link(o.gpu).bytes_per_s);
  if (!args.out_path.empty()) {
    solver::write_json_atomic(args.out_path, gpt2::estimate_json(est, o));
    std::printf("wrote %s\n", args.out_path.c_str());
  }
  if (!args.fit_chart) return;
  FitOptions fo;
  fo.estimate = o;
  fo.max_overhead = args.max_overhead;
  fo.slots = args.slots;
  fo.threads = args.threads;
  try {
    fo.reserve_bytes = solver::parse_bytes(args.reserve);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--reserve: ") + e.what());
  }
  FitReport report = fit_chart(fo, [](const std::string& what) { std::fprintf(stderr, "fit-chart: %s\n", what.c_str()); });
  report.command = o.command;
  const ReportFolder folder{args.out_dir, "fit.json", MEMOPT_PYTHON, std::string(MEMOPT_SOURCE_DIR) + "/tools/plot_fit.py",
                            !args.no_plot, fit_figures};
  write_report_folder(
      folder, to_json(report), [&](const std::vector<Figure>& f) { return fit_readme(report, f); },
      [](const std::string& cmd) {
        std::fprintf(stderr, "fit-chart: figures not made; to make them run:\n  %s\n", cmd.c_str());
      });
  std::printf("largest batch at seq %lld: store-all %lld, optimal<=%.0f%% %lld (modeled)\nreport: %s/README.md\n",
              static_cast<long long>(o.workload.seq_len), static_cast<long long>(report.largest_batch["store-all"]),
              100 * args.max_overhead, static_cast<long long>(report.largest_batch["optimal<=10%"]),
              args.out_dir.c_str());
}

}  // namespace

void add_estimate_command(CLI::App& app, const std::string& command_line) {
  auto args = std::make_shared<EstimateArgs>();
  args->choices.preset = "small";
  args->command = command_line;
  CLI::App* cmd = app.add_subcommand("estimate", "MODELED profile of GPT-2 on a GPU (analytic bytes, roofline times)");
  add_gpt2_flags(cmd, args->choices);
  cmd->add_option("--gpu", args->gpu, "GPU to model: " + gpt2::gpu_words())->required();
  cmd->add_option("--dtype", args->dtype, "fp32|fp16|bf16 (fp16/bf16: mixed precision, Note [Activation dtype])")
      ->capture_default_str();
  cmd->add_option("--out", args->out_path, "where to write the modeled profile.json");
  cmd->add_flag("--fit-chart", args->fit_chart, "also report how large a batch and sequence fit per strategy");
  cmd->add_option("--out-dir", args->out_dir, "folder of the fit-chart report");
  cmd->add_option("--reserve", args->reserve, "GPU memory kept for the CUDA context and allocator slack")
      ->capture_default_str();
  cmd->add_option("--max-overhead", args->max_overhead, "overhead cap for 'optimal<=10%' (0.10 = 10%)")
      ->capture_default_str();
  cmd->add_option("--slots", args->slots, "memory discretisation of the DP")->capture_default_str();
  cmd->add_option("--threads", args->threads, "threads for the DP (0: all cores)")->capture_default_str();
  cmd->add_flag("--no-plot", args->no_plot, "skip the figures (tools/plot_fit.py)");
  cmd->callback([args] { run_estimate(*args); });
}

}  // namespace memopt::tools

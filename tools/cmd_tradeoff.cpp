// cmd_tradeoff.cpp: `memopt tradeoff` -- every solver at every budget, predicted (and
// with --run measured on this machine), written as a report folder: tradeoff.json,
// README.md and the figures of tools/plot_tradeoff.py.
//   memopt tradeoff --profile P.json --budgets 20%:100%:5% --out DIR
//   memopt tradeoff --profile P.json --budgets 30%:100%:10% --run --steps 3 --out DIR
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "report/tradeoff.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/profile_flags.h"
#include "tools/report_table.h"
#ifdef MEMOPT_WITH_TORCH
#include "runtime/measured_run.h"
#include "runtime/stage_timing.h"
#endif

namespace memopt::tools {
using namespace memopt::report;

namespace {

struct TradeoffArgs {
  std::string profile_path, budgets = "20%:100%:5%", bandwidth, emulate, solvers, out_dir;
  int slots = 500, threads = 0, steps = 5, warmup_steps = 2, run_threads = 0;
  bool run = false, check = false, no_plot = false, profile_times = false, one_price = false;
  std::string command;  // as invoked, recorded in the report
};

std::vector<solver::SolverKind> parse_solvers(const std::string& text, const solver::Chain& chain) {
  if (text.empty()) return default_tradeoff_solvers(chain);
  std::vector<solver::SolverKind> out;
  std::stringstream ss(text);
  for (std::string word; std::getline(ss, word, ',');) {
    const auto kind = solver::solver_kind_from_word(word);
    if (!kind) throw std::invalid_argument("--solvers: unknown solver '" + word + "'; choose from " + solver_words());
    out.push_back(*kind);
  }
  return out;
}

void run_tradeoff(const TradeoffArgs& args) {
  using namespace memopt::solver;
#ifndef MEMOPT_WITH_TORCH
  if (args.run)
    throw std::invalid_argument("--run: this memopt was built without LibTorch (MEMOPT_TORCH=OFF); rebuild with "
                                "MEMOPT_TORCH=ON (scripts/build.sh), or drop --run for predicted numbers only");
#endif
  Profile profile = read_profile(args.profile_path);
  apply_bandwidth_flag(profile, args.bandwidth);
  apply_emulate_flag(profile, args.emulate, args.bandwidth);
  if (args.steps < 1) throw std::invalid_argument("--steps: must be at least 1");
  TradeoffOptions options;
  options.slots = args.slots;
  options.threads = args.threads;
  options.solvers = parse_solvers(args.solvers, profile.chain);
  for (const SolverKind kind : options.solvers)
    check_problem_size_flags(profile.chain, {0, kind, args.slots, args.threads}, args.profile_path);
  const int64_t store_all_peak = store_all_peak_bytes(profile.chain);
  options.budgets_bytes = parse_budget_list(args.budgets, store_all_peak);
  print_profile_header(args.profile_path, profile, store_all_peak);
  std::fflush(stdout);  // before the progress lines on stderr
  std::fprintf(stderr, "tradeoff: %zu budgets x %zu solvers%s\n", options.budgets_bytes.size(), options.solvers.size(),
               args.run ? ", each distinct schedule measured" : "");

  MeasureFn measure;
  std::string predicted_times = "profile";
#ifdef MEMOPT_WITH_TORCH
  std::unique_ptr<runtime::ProfiledModel> model;
  if (args.run) {
    model = std::make_unique<runtime::ProfiledModel>(profile, args.run_threads);
    // Note [Stage times from this process]: the plans and their predictions use stage
    // times measured here, before the measured rounds.
    const bool retime = !args.profile_times && profile.measured && model->backend() == measure::Backend::Cpu;
    if (retime) {
      std::fprintf(stderr, "tradeoff: re-timing every stage in this process (--profile-times keeps the profile's)\n");
      model->retime_stages(profile.chain);
      predicted_times = "this process";
    }
    measure = [&, retime](const std::vector<Schedule>& schedules) {  // retime: this block's, by value
      runtime::MeasureOptions mo;
      mo.steps = args.steps;
      mo.warmup_steps = args.warmup_steps;
      mo.check = args.check;
      const int rounds = runtime::warmup_rounds(mo) + args.steps;
      std::fprintf(stderr, "tradeoff: measuring %zu distinct schedules, %d warm-up + %d measured steps each, "
                           "interleaved\n", schedules.size(), args.warmup_steps, args.steps);
      mo.on_step = [&](int k, const runtime::StepMeasurement& m) {
        if (k + 1 == static_cast<int>(schedules.size()))
          std::fprintf(stderr, "[round %2d/%d%s] last step %.2f ms\n", m.step, rounds, m.warmup ? ", warm-up" : "",
                       m.time_ms);
      };
      std::vector<std::string> sources;
      for (const Schedule& s : schedules) sources.push_back(s.solver + " schedule");
      // Note [Stage times from the measured rounds] in runtime/measured_run.h: each
      // schedule is also predicted from stage times taken among its own steps.
      runtime::StageTimes in_rounds;
      if (retime) mo.stage_times_in_rounds = &in_rounds;
      const auto all = model->measure_interleaved(profile.chain, schedules, mo, sources);
      std::optional<Chain> timed_in_rounds;
      if (retime) {
        runtime::apply_stage_times(timed_in_rounds.emplace(profile.chain), in_rounds);
        if (args.one_price) drop_pair_times(*timed_in_rounds);
      }
      std::vector<MeasuredPoint> out;
      for (size_t k = 0; k < all.size(); ++k) {
        const runtime::ScheduleMeasurement& m = all[k];
        out.push_back({m.median_peak_bytes, m.reserved_peak_bytes, m.time_ms,
                       args.steps, runtime::warmup_rounds(mo), m.max_abs_grad_diff, "", std::nullopt});
        if (timed_in_rounds)
          out.back().predicted_in_rounds_ms = simulate_timeline(*timed_in_rounds, schedules[k].ops).time_ms;
      }
      return out;
    };
  }
#endif
  if (args.one_price) {
    std::fprintf(stderr, "tradeoff: one price per op (--one-price-per-op): a stage run back to back costs its store-all "
                         "times\n");
    drop_pair_times(profile.chain);
  }
  const auto progress = [&](int done, int total, const TradeoffPoint& p) {
    std::fprintf(stderr, "[%3d/%d] %6.1f%% %-16s %-10s", done, total,
                 100.0 * static_cast<double>(p.budget_bytes) / static_cast<double>(store_all_peak), p.solver.c_str(),
                 p.status.c_str());
    if (p.status == "ok")
      std::fprintf(stderr, " predicted %9.3f ms %11s", p.predicted_time_ms, format_bytes(p.predicted_peak_bytes).c_str());
    if (p.measured)
      std::fprintf(stderr, " | measured %9.3f ms %11s%s", p.measured->time_ms.median, format_bytes(p.measured->peak_bytes).c_str(),
                   p.measured->same_ops_as.empty() ? "" : " (same ops as before)");
    std::fprintf(stderr, "\n");
  };
  TradeoffReport report = sweep(profile, options, measure, progress);
  report.predicted_times = predicted_times;
  report.command = args.command;
  report.profile_path = args.profile_path;
  report.machine = this_machine();
  // The measured runs train where the profile was measured (runtime::ProfiledModel).
  if (args.run)
    report.machine["run_device"] = profile.device.value("kind", std::string("cpu")) == "cuda"
                                       ? profile.device.value("name", std::string("a CUDA GPU"))
                                       : report.machine.value("cpu", std::string("this CPU"));

  const ReportFolder folder{args.out_dir, "tradeoff.json", MEMOPT_PYTHON,
                            std::string(MEMOPT_SOURCE_DIR) + "/tools/plot_tradeoff.py", !args.no_plot, tradeoff_figures};
  const std::vector<Figure> figures = write_report_folder(
      folder, to_json(report), [&](const std::vector<Figure>& f) { return tradeoff_readme(report, f); },
      [](const std::string& cmd) {
        std::fprintf(stderr, "tradeoff: figures not made; to make them run:\n  %s\n", cmd.c_str());
      });
  std::printf("\nreport: %s/README.md (tradeoff.json, %zu figure%s)\n", args.out_dir.c_str(), figures.size(),
              figures.size() == 1 ? "" : "s");
}

}  // namespace

void add_tradeoff_command(CLI::App& app, const std::string& command_line) {
  auto args = std::make_shared<TradeoffArgs>();
  args->command = command_line;
  CLI::App* cmd = app.add_subcommand("tradeoff", "Every solver at every budget: time vs memory report (+ measured with --run)");
  cmd->add_option("--profile", args->profile_path, "profile.json (memopt profile or memopt estimate)")->required();
  cmd->add_option("--budgets", args->budgets,
                  "first:last:step or a comma list; % of the store-all peak or sizes (1GiB)")->capture_default_str();
  cmd->add_option("--bandwidth", args->bandwidth, "host link for offloading, e.g. 16GB/s, or none (overrides the profile's)");
  cmd->add_option("--emulate", args->emulate, "emulate GPU:LINK[:DTYPE] on this CPU, e.g. h100-sxm:pcie5 or gh200:nvlink-c2c: the copy link at that GPU's ratio of link to compute");
  cmd->add_option("--solvers", args->solvers, "comma list (default: optimal,recompute-only,sqrt,recompute-blocks,"
                                              "recompute-all,store-all,offload-all, and selective,pointwise on operator stages)");
  cmd->add_option("--slots", args->slots, "memory discretisation of the DP")->capture_default_str();
  cmd->add_option("--threads", args->threads, "threads for the DP (0: all cores)")->capture_default_str();
  cmd->add_flag("--run", args->run, "also train each distinct schedule on this machine and measure it");
  cmd->add_option("--steps", args->steps, "measured steps per schedule with --run, one per interleaved round")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", args->warmup_steps, "unmeasured steps per schedule first, with --run")
      ->capture_default_str();
  cmd->add_option("--run-threads", args->run_threads, "compute threads when running (default: the profile's)");
  cmd->add_flag("--check", args->check, "with --run, compare the warm-up steps' gradients (at least one) with plain autograd; the measured steps "
                "run unchecked");
  cmd->add_flag("--profile-times", args->profile_times,
                "with --run, predict from the profile's stage times instead of re-timing the stages in this process");
  cmd->add_flag("--one-price-per-op", args->one_price,
                "plan and predict as if a stage run back to back cost its store-all times (docs/formats.md, "
                "\"A stage run back to back\")");
  cmd->add_flag("--no-plot", args->no_plot, "skip the figures (tools/plot_tradeoff.py)");
  cmd->add_option("--out", args->out_dir, "report folder")->required();
  cmd->callback([args] { run_tradeoff(*args); });
}

}  // namespace memopt::tools

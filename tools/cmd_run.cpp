// cmd_run.cpp: `memopt run` -- rebuild the model a profile describes, train N steps
// (AdamW) along a schedule, and print measured next to predicted peak and time.
//   memopt run --profile P.json --schedule S.json --steps 3 --check
#include <algorithm>
#include <optional>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "measure/backend.h"
#include "measure/trace.h"
#include "runtime/measured_run.h"
#include "runtime/stage_timing.h"
#include "solver/io/atomic_file.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/io/schedule_check.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/profile_flags.h"

namespace memopt::tools {
namespace {

struct RunArgs {
  std::string profile_path, schedule_path, summary_path;
  std::string trace_out;      // one more step, traced: per op, and the copies under kernels
  std::string device_memory;  // the CPU testbed's device capacity (Note [Device memory limit])
  std::string emulate;        // the copy link at a GPU's ratio (tools/profile_flags.h)
  std::string device;         // cpu|cuda; empty: the profile's device.kind
  int steps = 5;
  int warmup_steps = 2;
  int threads = 0;  // 0: what the profile was measured with
  bool check = false;
  bool profile_times = false;  // predict from the profile's stage times, not this process's
  bool op_times = false;       // the measured steps' time by where each op ran
  double lr = 1e-4;
};

void run_run(const RunArgs& args) {
  using namespace memopt::solver;
  Profile profile = read_profile(args.profile_path);
  apply_emulate_flag(profile, args.emulate);
  const Schedule schedule = read_schedule(args.schedule_path);
  if (args.steps < 1) throw std::invalid_argument("--steps: must be at least 1");
  if (args.warmup_steps < 0) throw std::invalid_argument("--warmup-steps: must be at least 0");
  int64_t device_limit = 0;
  if (!args.device_memory.empty()) {
    try {
      device_limit = parse_bytes(args.device_memory);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("--device-memory: ") + e.what());
    }
  }
  // Checked against the profile before the model is built: a bad schedule costs nothing.
  SimResult sim = check_schedule_for_chain(schedule, profile.chain, args.schedule_path, args.profile_path);
  std::optional<measure::Backend> backend;
  if (!args.device.empty()) backend = measure::parse_backend(args.device);
  runtime::ProfiledModel model(profile, args.threads, device_limit, backend);
  model.check_fits(schedule, args.schedule_path);
  // Note [Stage times from this process]: predicted from this process's stage times --
  // but not under an emulated device capacity, which the timing steps (store-all
  // among them) need not fit.
  const bool retime = !args.profile_times && profile.measured && model.backend() == measure::Backend::Cpu &&
                      device_limit == 0;
  if (retime) {
    std::fprintf(stderr, "run: re-timing every stage in this process (--profile-times keeps the profile's)\n");
    model.retime_stages(profile.chain);
    sim = simulate_timeline(profile.chain, schedule.ops);
  }

  // The kernels are the profile's (Note [Kernel choice]): its saved bytes depend on them.
  std::printf("model    %s (%s kernels), %d stages, on %s (%d thread(s)); schedule %s (%s, budget %s)\n",
              profile.model.value("name", std::string("?")).c_str(),
              profile.model.value("kernels", std::string("aten")).c_str(), model.num_stages(),
              measure::backend_word(model.backend()), model.threads(),
              args.schedule_path.c_str(), schedule.solver.c_str(), format_bytes(schedule.budget_bytes).c_str());
  std::printf("predicted: peak %s, time %.2f ms (stage times from %s)\n\n", format_bytes(sim.peak_bytes).c_str(),
              sim.time_ms, retime ? "this process" : "the profile");
  std::printf("%7s %10s %12s %8s %12s %10s %8s%s\n", "step", "loss", "peak", "/pred", "reserved", "time (ms)", "/pred",
              args.check ? "   max |grad - plain grad| (rel)" : "");
  runtime::MeasureOptions options;
  options.steps = args.steps;
  options.warmup_steps = args.warmup_steps;
  options.check = args.check;
  options.lr = args.lr;
  options.on_step = [&](int, const runtime::StepMeasurement& m) {
    std::string check_text;
    if (m.checked) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "   %.3g (%.3g), loss diff %.3g", m.max_abs_grad_diff,
                    m.max_abs_grad_ref > 0 ? m.max_abs_grad_diff / m.max_abs_grad_ref : 0.0, m.loss_diff);
      check_text = buf;
    }
    std::printf("%5d%s %10.5f %12s %7.3fx %12s %10.2f %7.3fx%s\n", m.step, m.warmup ? " w" : "  ", m.loss,
                format_bytes(m.activation_peak_bytes).c_str(),
                static_cast<double>(m.activation_peak_bytes) / static_cast<double>(sim.peak_bytes),
                m.reserved_peak_bytes >= 0 ? format_bytes(m.reserved_peak_bytes).c_str() : "?", m.time_ms,
                m.time_ms / sim.time_ms, check_text.c_str());
    if (m.activation_peak_bytes > schedule.budget_bytes)
      std::printf("      measured peak exceeds the budget by %s\n",
                  format_bytes(m.activation_peak_bytes - schedule.budget_bytes).c_str());
  };
  options.trace = !args.trace_out.empty();
  options.op_times = args.op_times;
  // Note [Stage times from the measured rounds] in runtime/measured_run.h.
  runtime::StageTimes in_rounds;
  if (retime) options.stage_times_in_rounds = &in_rounds;
  const runtime::ScheduleMeasurement r = model.measure(profile.chain, schedule, options, args.schedule_path);
  const double peak = static_cast<double>(r.median_peak_bytes), time = r.time_ms.median;
  std::printf("\nmedian of %d steps after %d warm-up (w): peak %s (%.3fx predicted; reserved %s), time %.2f ms "
              "(IQR %.2f-%.2f; %.3fx predicted)\n",
              args.steps, runtime::warmup_rounds(options), format_bytes(r.median_peak_bytes).c_str(),
              peak / static_cast<double>(sim.peak_bytes), format_bytes(r.reserved_peak_bytes).c_str(), time,
              r.time_ms.q25, r.time_ms.q75, time / sim.time_ms);
  std::optional<double> predicted_in_rounds_ms;
  if (retime) {
    solver::Chain timed_in_rounds = profile.chain;
    runtime::apply_stage_times(timed_in_rounds, in_rounds);
    predicted_in_rounds_ms = simulate_timeline(timed_in_rounds, schedule.ops).time_ms;
    std::printf("predicted from stage times taken in the measured rounds: %.2f ms (%.3fx)\n", *predicted_in_rounds_ms,
                time / *predicted_in_rounds_ms);
  }
  if (!r.op_times.empty())
    std::printf("\ntime by where the ops ran, median over the measured steps:\n%s",
                runtime::format_op_time_rows(r.op_times).c_str());
  if (r.trace) {
    std::printf("\none more step, traced (every op in its range memopt/<op>/<stage>):\n%s",
                measure::format_trace_report(*r.trace).c_str());
    if (model.backend() == measure::Backend::Cpu)
      std::printf("(on the CPU testbed a trace has the ranges only: kernel and copy times come from CUPTI on cuda)\n");
    solver::write_json_atomic(args.trace_out, measure::trace_report_json(*r.trace));
    std::printf("wrote %s\n", args.trace_out.c_str());
  }
  if (!args.summary_path.empty()) {
    nlohmann::json line = runtime::run_summary_json(args.profile_path, args.schedule_path, schedule, sim, r);
    line["predicted_times"] = retime ? "this process" : "profile";
    if (predicted_in_rounds_ms) line["predicted_in_rounds_ms"] = *predicted_in_rounds_ms;
    if (!r.op_times.empty()) line["op_times"] = runtime::op_time_rows_json(r.op_times);
    append_line_atomic(args.summary_path, line.dump());
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Train a few steps along a schedule; measured vs predicted peak and time");
  cmd->add_option("--profile", args->profile_path, "profile.json describing the model")->required();
  cmd->add_option("--schedule", args->schedule_path, "schedule.json from `memopt solve`")->required();
  cmd->add_option("--steps", args->steps, "measured training steps (AdamW), after the warm-up")->capture_default_str();
  cmd->add_option("--warmup-steps", args->warmup_steps, "unmeasured steps first (Note [Measurement protocol])")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "compute threads (default: the profile's)");
  cmd->add_option("--lr", args->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--summary-out", args->summary_path, "append one JSON line with predicted and measured numbers");
  cmd->add_option("--trace-out", args->trace_out,
                  "after the measured steps, trace one more (NVTX ranges per op; CUPTI kernels and copies on cuda) "
                  "and write it as JSON: time per op, and how much of the copies ran under kernels");
  cmd->add_option("--device-memory", args->device_memory,
                  "emulate a device of this capacity on the CPU (e.g. 256MiB): a plan that does not fit is refused "
                  "with the budget to solve for");
  cmd->add_option("--emulate", args->emulate, "emulate GPU:LINK[:DTYPE] on this CPU, e.g. h100-sxm:pcie5 or gh200:nvlink-c2c: the copy link at that GPU's ratio of link to compute");
  cmd->add_option("--device", args->device,
                  "cpu|cuda: where to train (default: the profile's device; cuda needs the `cuda` build and a GPU)");
  cmd->add_flag("--op-times", args->op_times,
                "time every op of the measured steps and print the step split by where its ops ran (forward, "
                "recomputation, backward of a kept or of a recomputed stage) against the prediction; CPU only");
  cmd->add_flag("--check", args->check, "also run the warm-up steps (at least one) by plain autograd and report their gradient difference; "
                "the measured steps run unchecked, as without --check");
  cmd->add_flag("--profile-times", args->profile_times,
                "predict from the profile's stage times instead of re-timing the stages in this process first "
                "(always so with --device-memory)");
  cmd->callback([args] { run_run(*args); });
}

}  // namespace memopt::tools

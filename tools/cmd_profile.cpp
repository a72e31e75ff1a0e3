// cmd_profile.cpp: `memopt profile` -- build a GPT-2, measure every stage on this
// CPU (profiler/profiler.h) and write profile.json (docs/formats.md, "profile.json").
//   memopt profile --model gpt2 --preset tiny --out profile.json
//   memopt profile --preset small --batch 1 --seq 512 --granularity sublayer --out small.json
//   memopt profile --hf-dir ~/gpt2 --seq 256 --attention sdpa --out hf.json
//   memopt profile --preset tiny --kernels memopt --out m.json   # memopt's mask-free dropout, fused GELU
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <unistd.h>

#include "gpt2/spec_choices.h"
#include "model/device.h"
#include "model/factory.h"
#include "model/hf_weights.h"
#include "profiler/profiler.h"
#include "runtime/copy_engine.h"
#include "runtime/stage_timing.h"
#include "solver/dp/baselines.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"
#include "tools/commands.h"
#include "tools/gpt2_flags.h"
#include "tools/profile_flags.h"

namespace memopt::tools {
namespace {

struct ProfileArgs {
  gpt2::Gpt2Choices choices;  // --preset tiny unless given; gpt2/spec_choices.h
  int repeat = 5, threads = 1;
  std::string hf_dir, out_path;
  std::string link = "measured";  // the copy engine's cap, or "measured" (uncapped)
  std::string emulate;            // GPU:LINK[:DTYPE]: the cap at that GPU's ratio (Note [Emulated link])
  std::string device = "cpu";     // measure::Backend's word
  std::string trace_out;          // the per-stage device trace as JSON
  std::string stage_times;  // steps | isolated (runtime/stage_timing.h); "": steps on the CPU, isolated on CUDA
};

// Redraws "profiling [#####.....] 3/6 stages" on stderr, only on a terminal and only
// once the work has taken more than a second.
class ProgressBar {
 public:
  void update(int done, int total) {
    if (!enabled_) return;
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed_s < 1.0 && !shown_) return;
    shown_ = true;
    constexpr int kWidth = 30;
    const int filled = total > 0 ? kWidth * done / total : kWidth;
    std::fprintf(stderr, "\rprofiling [%s%s] stage %d/%d, %.0f s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total, elapsed_s);
    std::fflush(stderr);
  }
  ~ProgressBar() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_ = ::isatty(2) != 0;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

gpt2::Gpt2Spec spec_from_args(const ProfileArgs& a) {
  gpt2::Gpt2Choices choices = a.choices;
  // With --hf-dir the model's dimensions are its config.json's.
  if (!a.hf_dir.empty())
    choices.base = gpt2::BaseConfig{model::read_hf_gpt2_config(a.hf_dir), a.hf_dir + "/config.json", a.hf_dir};
  const gpt2::Gpt2Spec spec = gpt2::build_gpt2_spec(choices, gpt2_flag);
  if (a.repeat < 1) throw std::invalid_argument("--repeat: must be at least 1");
  if (a.threads < 1) throw std::invalid_argument("--threads: must be at least 1");
  return spec;
}

void print_summary(const gpt2::Gpt2Spec& spec, const profiler::MeasuredProfile& m, int repeat) {
  using solver::format_bytes;
  const solver::Profile& p = m.profile;
  const gpt2::Gpt2Config& c = spec.config;
  std::printf("gpt2%s%s: %lld layers, C=%lld, H=%lld, V=%lld, B=%lld, T=%lld, %s stages, %s attention, dropout %g, "
              "%s kernels, %s loss\n",
              spec.preset.empty() ? "" : " ", spec.preset.c_str(), static_cast<long long>(c.n_layer),
              static_cast<long long>(c.n_embd), static_cast<long long>(c.n_head), static_cast<long long>(c.vocab_size),
              static_cast<long long>(spec.workload.batch), static_cast<long long>(spec.workload.seq_len),
              gpt2::granularity_word(c.granularity), gpt2::attention_word(c.attention), c.attn_pdrop,
              gpt2::kernels_word(c.kernels), gpt2::loss_word(c.loss));
  if (!spec.hf_dir.empty()) std::printf("weights  %s\n", spec.hf_dir.c_str());
  std::printf("device   %s, %d thread%s; median of %d runs per stage\n\n",
              p.device.at("name").get<std::string>().c_str(), p.device.at("threads").get<int>(),
              p.device.at("threads").get<int>() == 1 ? "" : "s", repeat);
  int name_width = 10;
  for (const solver::Stage& s : p.chain.stages) name_width = std::max(name_width, static_cast<int>(s.name.size()));
  // The bytes an operator stage's output shares with its input (docs/formats.md, "Carried bytes").
  const bool carries = p.chain.carries();
  std::printf("%-*s %9s %9s %11s %11s %11s %11s%s\n", name_width, "stage", "fwd ms", "bwd ms", "out", "saved",
              "fwd tmp", "bwd tmp", carries ? "     carried" : "");
  double fwd_ms = 0, bwd_ms = 0;
  int64_t saved_bytes = 0;
  for (const solver::Stage& s : p.chain.stages) {
    std::printf("%-*s %9.2f %9.2f %11s %11s %11s %11s", name_width, s.name.c_str(), s.fwd_ms, s.bwd_ms,
                format_bytes(s.out_bytes).c_str(), format_bytes(s.saved_bytes).c_str(),
                format_bytes(s.fwd_tmp_bytes).c_str(), format_bytes(s.bwd_tmp_bytes).c_str());
    if (carries) std::printf(" %11s", format_bytes(s.carried_bytes).c_str());
    std::printf("\n");
    fwd_ms += s.fwd_ms;
    bwd_ms += s.bwd_ms;
    saved_bytes += s.saved_bytes;
  }
  std::printf("%-*s %9.2f %9.2f %11s %11s\n\n", name_width, "total", fwd_ms, bwd_ms, "",
              format_bytes(saved_bytes).c_str());
  const solver::SimResult store_all = solver::simulate_sequential(p.chain, solver::store_all_ops(p.chain));
  std::printf("input    %s (token ids)\n", format_bytes(p.chain.input_bytes).c_str());
  std::printf("static   %s (parameters + gradients + AdamW's two moments; not in the budget)\n",
              format_bytes(p.static_bytes).c_str());
  if (store_all.valid)
    std::printf("store-all activation peak %s, one step %.1f ms\n", format_bytes(store_all.peak_bytes).c_str(),
                store_all.time_ms);
}

void run_profile(const ProfileArgs& args) {
  // The device first: without the CUDA backend or a GPU, say so before building anything.
  const measure::Backend backend = measure::parse_backend(args.device);
  measure::require_backend(backend);
  const bool on_cuda = backend == measure::Backend::Cuda;
  const c10::Device device = measure::backend_device(backend);
  // The link the executor's copy engine will offer, measured through that engine.
  double cap = 0;
  if (args.link != "measured") {
    if (on_cuda) throw std::invalid_argument("--link: a CUDA device's link is measured, not emulated; drop --link");
    try {
      cap = solver::parse_bandwidth(args.link);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("--link: ") + e.what() + "; or `measured` for the uncapped engine");
    }
  }
  if (!args.emulate.empty() && (on_cuda || args.link != "measured"))
    throw std::invalid_argument(on_cuda ? "--emulate: a CUDA device's link is its own; drop --emulate"
                                        : "--emulate and --link both set the copy link; give one of them");
  const std::string stage_times = !args.stage_times.empty() ? args.stage_times : on_cuda ? "isolated" : "steps";
  if (stage_times != "steps" && stage_times != "isolated")
    throw std::invalid_argument("--stage-times: '" + stage_times + "'; use steps or isolated");
  if (on_cuda && stage_times == "steps")
    throw std::invalid_argument("--stage-times steps: times ops on the host's clock, which a GPU's asynchronous "
                                "kernels do not stop; use --stage-times isolated with --device cuda");
  const gpt2::Gpt2Spec spec = spec_from_args(args);
  // The model the profile will name, built as every later command builds it from the
  // profile (Note [One factory for the models] in model/factory.h).
  model::BuiltModel built = model::build_model(gpt2::gpt2_spec_to_json(spec));
  model::StagedModel& model = built.staged;
  model::Batch& batch = built.batch;
  if (on_cuda) model::move_to(model, batch, device);
  profiler::ProfileOptions options;
  options.repeat = args.repeat;
  options.threads = args.threads;
  profiler::DeviceProfile traced;
  {
    ProgressBar bar;
    options.on_progress = [&bar](int done, int total) { bar.update(done, total); };
    traced = profiler::profile_on(backend, model, batch, gpt2::gpt2_spec_to_json(spec), options);
  }
  profiler::MeasuredProfile& measured = traced.measured;
  if (stage_times == "steps") {
    // Note [Stage times from training steps]: the byte fields stay the isolated
    // protocol's (exact); the times are replaced by those of warm training steps.
    std::fprintf(stderr, "profile: timing every stage inside training steps (store-all and checkpoint-every-stage, "
                         "2 warm-up + 5 rounds)\n");
    runtime::StageTimingOptions timing;
    timing.threads = args.threads;
    const runtime::StageTimes t = runtime::time_stages_in_steps(model, batch, measured.profile.chain, timing);
    runtime::apply_stage_times(measured.profile.chain, t);
    for (size_t i = 0; i < measured.details.size(); ++i) measured.details[i].fwd_nograd_ms = t.fwd_nograd_ms[i];
    measured.profile.device["stage_times"] = "training steps";
  } else {
    measured.profile.device["stage_times"] = "isolated";
  }
  print_summary(spec, measured, args.repeat);
  if (!args.emulate.empty()) {
    // The emulated rate comes from the stage times just measured; the engine is then
    // checked at that cap with transfers of about 50 ms each.
    apply_emulate_flag(measured.profile, args.emulate);
    const double rate = measured.profile.chain.link->d2h_bytes_per_s;
    const auto bytes = std::max<int64_t>(64 << 10, static_cast<int64_t>(rate * 0.05) / 64 * 64);
    const runtime::LinkBandwidth bw = runtime::measure_copy_bandwidth(rate, rate, bytes, 3, device);
    const nlohmann::ordered_json& e = measured.profile.device.at("link_emulation");
    std::printf("link     emulates %s over %s: %s each way (this CPU %.3g GFLOP/s on this model, the GPU %.3g "
                "TFLOP/s, link %s); the engine reached d2h %s, h2d %s\n",
                e.at("gpu").get<std::string>().c_str(), e.at("link").get<std::string>().c_str(),
                solver::format_bandwidth(rate).c_str(), e.at("testbed_flop_per_s").get<double>() / 1e9,
                e.at("gpu_flop_per_s").get<double>() / 1e12,
                solver::format_bandwidth(e.at("link_bytes_per_s").get<double>()).c_str(),
                solver::format_bandwidth(bw.d2h_bytes_per_s).c_str(), solver::format_bandwidth(bw.h2d_bytes_per_s).c_str());
  } else {
    const runtime::LinkBandwidth bw = runtime::measure_copy_bandwidth(cap, cap, 64 << 20, 5, device);
    measured.profile.chain.link = solver::Link{bw.d2h_bytes_per_s, bw.h2d_bytes_per_s};
    std::printf("link     d2h %.2f GB/s, h2d %.2f GB/s (%s copy engine, %s)\n", bw.d2h_bytes_per_s / 1e9,
                bw.h2d_bytes_per_s / 1e9, on_cuda ? "CUDA" : "CPU",
                cap > 0 ? ("capped at " + args.link).c_str() : "uncapped");
  }
  if (on_cuda) std::printf("\ndevice work per stage op (CUPTI; NVTX ranges memopt/<op>/<stage>)\n%s",
                           measure::format_trace_report(traced.trace).c_str());
  if (!args.trace_out.empty()) {
    solver::write_json_atomic(args.trace_out, measure::trace_report_json(traced.trace));
    std::printf("wrote %s\n", args.trace_out.c_str());
  }
  if (!args.out_path.empty()) {
    solver::write_json_atomic(args.out_path, profiler::profile_json(measured));
    std::printf("\nwrote %s (%d stages)\n", args.out_path.c_str(), measured.profile.chain.length());
  }
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure a model's stages on this CPU (or a GPU: --device cuda) into profile.json");
  add_gpt2_flags(cmd, args->choices);
  add_gpt2_model_flags(cmd, args->choices);
  cmd->add_option("--repeat", args->repeat, "measured runs per stage (times are medians)")->capture_default_str();
  cmd->add_option("--threads", args->threads, "compute threads while measuring (one plays the GPU's stream)")
      ->capture_default_str();
  cmd->add_option("--seed", args->choices.seed, "seed of the random weights and batch")->capture_default_str();
  cmd->add_option("--hf-dir", args->hf_dir, "load a local Hugging Face GPT-2 (config.json + model.safetensors)");
  cmd->add_option("--link", args->link,
                  "host<->device link the copy engine emulates, e.g. 16GB/s; `measured` copies uncapped")
      ->capture_default_str();
  cmd->add_option("--emulate", args->emulate, "emulate GPU:LINK[:DTYPE] on this CPU, e.g. h100-sxm:pcie5 or gh200:nvlink-c2c: the copy link at that GPU's ratio of link to compute");
  cmd->add_option("--device", args->device, "cpu|cuda: where to measure (cuda needs the `cuda` build and a GPU)")
      ->capture_default_str();
  cmd->add_option("--stage-times", args->stage_times,
                  "steps: time each stage inside warm training steps (the CPU's default); isolated: rotor's "
                  "protocol, each stage alone (CUDA's)");
  cmd->add_option("--trace-out", args->trace_out, "write the per-stage device trace (CUPTI on cuda) as JSON");
  cmd->add_option("--out", args->out_path, "where to write profile.json");
  cmd->callback([args] { run_profile(*args); });
}

}  // namespace memopt::tools

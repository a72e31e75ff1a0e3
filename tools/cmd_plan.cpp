// cmd_plan.cpp: `memopt plan` -- what ZeRO leaves on each rank, the activation budget
// that remains (per micro-batch under 1F1B), and the schedule of each pipeline stage.
//   memopt plan --profile P.json --gpu-memory 16GiB --world-size 4 --zero-stage 3 --out S.json
//   memopt plan ... --pipeline-stages 2 --micro-batches 4 --out S.json   (S.stage0.json, S.stage1.json)
#include <cstdio>
#include <limits>
#include <string>

#include "solver/distributed/distributed_plan.h"
#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/units.h"
#include "tools/commands.h"

namespace memopt::tools {
namespace {

struct PlanArgs {
  std::string profile_path, gpu_memory, out_path;
  std::string solver = "optimal";
  int world_size = 1, zero_stage = 0, pipeline_stages = 1, micro_batches = 1, slots = 500;
};

void run_plan(const PlanArgs& a) {
  using namespace memopt::solver;
  const Profile profile = read_profile(a.profile_path);
  int64_t device = 0;
  try {
    device = parse_bytes(a.gpu_memory);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--gpu-memory: ") + e.what());
  }
  const auto kind = solver_kind_from_word(a.solver);
  if (!kind) throw std::invalid_argument("--solver: unknown solver '" + a.solver + "'");
  DistributedLayout layout{a.world_size, a.zero_stage, a.pipeline_stages, a.micro_batches,
                           profile.model.value("batch", int64_t{0})};
  SolveOptions options;
  options.solver = *kind;
  options.slots = a.slots;
  // The planner names quantities; say which flags set them.
  const std::string layout_flags = "--gpu-memory, --world-size, --zero-stage, --pipeline-stages and --micro-batches";
  const auto plans = [&] {
    try {
      return plan_distributed(profile.chain, layout, device, options, a.profile_path);
    } catch (const LayoutError& e) {
      throw LayoutError(std::string(e.what()) + "; " + layout_flags + " set the layout");
    } catch (const InfeasibleBudget& e) {
      throw InfeasibleBudget(std::string(e.what()) + " " + layout_flags + " set the budget.", e.min_budget_bytes,
                             e.store_all_peak_bytes);
    } catch (const ProblemTooLarge& e) {
      const std::string what = e.what();
      throw ProblemTooLarge(what.starts_with("/") ? what : "--slots " + std::to_string(a.slots) + ": " + what);
    }
  }();
  std::printf("layout   %d rank(s) = %d data-parallel x %d pipeline stage(s); ZeRO-%d; %d micro-batch(es) of %lld rows\n",
              a.world_size, data_parallel_ranks(layout), a.pipeline_stages, a.zero_stage, a.micro_batches,
              static_cast<long long>(micro_batch_rows(layout)));
  std::printf("device   %s per rank\n\n", format_bytes(device).c_str());
  for (size_t k = 0; k < plans.size(); ++k) {
    const PipelineStagePlan& p = plans[k];
    std::printf("pipeline stage %zu: chain stages %d..%d (%s..%s)\n", k, p.begin, p.end - 1,
                profile.chain.stages[p.begin].name.c_str(), profile.chain.stages[p.end - 1].name.c_str());
    std::printf("  static bytes per rank   %12s  = params %s + grads %s + AdamW %s + transient %s\n",
                format_bytes(p.zero.static_bytes()).c_str(), format_bytes(p.zero.param_bytes).c_str(),
                format_bytes(p.zero.grad_bytes).c_str(), format_bytes(p.zero.optimizer_bytes).c_str(),
                format_bytes(p.zero.transient_bytes).c_str());
    std::printf("  activation budget       %12s  (%d micro-batch(es) in flight: %s each)\n",
                format_bytes(p.activation_budget_bytes).c_str(), p.in_flight,
                format_bytes(p.micro_batch_budget_bytes).c_str());
    std::printf("  schedule                %12s  peak %s, %.2f ms per micro-batch (predicted)\n",
                p.schedule.solver.c_str(), format_bytes(p.schedule.predicted.peak_bytes).c_str(),
                p.schedule.predicted.time_ms);
    if (!a.out_path.empty()) {
      const std::string path = stage_schedule_path(a.out_path, static_cast<int>(k), static_cast<int>(plans.size()));
      write_json_atomic(path, schedule_to_json(p.schedule));
      std::printf("  wrote                   %s\n", path.c_str());
    }
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Per-rank static bytes under ZeRO/pipeline, the activation budget left, and its schedules");
  cmd->add_option("--profile", a->profile_path, "profile.json (with per-stage param_bytes)")->required();
  cmd->add_option("--gpu-memory", a->gpu_memory, "device memory per rank: 16GiB, 80GB, ...")->required();
  const CLI::Range at_least_one(1, std::numeric_limits<int>::max());
  cmd->add_option("--world-size", a->world_size, "ranks")->capture_default_str()->check(at_least_one);
  cmd->add_option("--zero-stage", a->zero_stage, "0 (data parallel), 1, 2 or 3")->capture_default_str()->check(CLI::Range(0, 3));
  cmd->add_option("--pipeline-stages", a->pipeline_stages, "pipeline stages P (divides --world-size)")
      ->capture_default_str()
      ->check(at_least_one);
  cmd->add_option("--micro-batches", a->micro_batches, "micro-batches per step M")->capture_default_str()->check(at_least_one);
  cmd->add_option("--solver", a->solver, "solver for each stage's schedule")->capture_default_str();
  cmd->add_option("--slots", a->slots, "the DP's memory slots")->capture_default_str();
  cmd->add_option("--out", a->out_path, "schedule.json (S.stage<k>.json per pipeline stage when P > 1)");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace memopt::tools

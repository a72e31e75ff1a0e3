// trainer.cpp: layout, model, micro-batches, the step loop and the result files.
#include "distributed/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "distributed/pipeline.h"
#include "distributed/zero.h"
#include "measure/cpu_allocator.h"
#include "model/factory.h"
#include "model/hf_weights.h"
#include "runtime/copy_engine.h"
#include "runtime/copy_plan.h"
#include "solver/dp/baselines.h"
#include "solver/io/json_printer.h"
#include "solver/distributed/pipeline_partition.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"

namespace memopt::distributed {
namespace {

std::vector<int> ranks_where(int world, const std::function<bool(int)>& keep) {
  std::vector<int> out;
  for (int r = 0; r < world; ++r)
    if (keep(r)) out.push_back(r);
  return out;
}

}  // namespace

TrainResult train(const solver::Profile& profile, const TrainOptions& o, const LaunchEnv& env) {
  // The counting allocator first, so that every tensor below is counted.
  measure::CpuMemoryMeter meter;
  const int W = env.world_size, P = o.pipeline_stages, M = o.micro_batches;
  if (P < 1) throw std::invalid_argument("--pipeline-stages: must be at least 1");
  if (M < 1) throw std::invalid_argument("--micro-batches: must be at least 1");
  if (o.steps < 1) throw std::invalid_argument("--steps: must be at least 1");
  if (W % P != 0)
    throw std::invalid_argument("--pipeline-stages " + std::to_string(P) + " does not divide WORLD_SIZE " +
                                std::to_string(W) + "; ranks are laid out as data-parallel replicas x pipeline stages");
  const int D = W / P;
  TrainResult res;
  res.rank = env.rank;
  res.data_rank = env.rank / P;
  res.pipeline_rank = env.rank % P;
  const int k = res.pipeline_rank, d = res.data_rank;

  const gpt2::Gpt2Spec spec = gpt2::gpt2_spec_from_json(profile.model);
  if (profile.model.value("dtype", std::string("float32")) != "float32")
    throw std::invalid_argument("the profile's model is not float32; this testbed trains float32 only");
  const int64_t B = spec.workload.batch;
  if (B % (static_cast<int64_t>(D) * M) != 0)
    throw std::invalid_argument("the profile's batch of " + std::to_string(B) + " rows does not split into " +
                                std::to_string(D) + " data-parallel ranks x " + std::to_string(M) +
                                " micro-batches; profile with --batch a multiple of " + std::to_string(D * M));
  res.rows_per_micro_batch = B / (D * M);

  // The cut is a function of the profile alone, so every rank computes the same one.
  const solver::Chain& chain = profile.chain;
  std::vector<int> bounds = solver::pipeline_cuts(chain, P);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(chain.length());
  res.chain_begin = bounds[k];
  res.chain_end = bounds[k + 1];
  if (!o.schedules.empty() && static_cast<int>(o.schedules.size()) != P)
    throw std::invalid_argument("--schedule: " + std::to_string(o.schedules.size()) + " given for " +
                                std::to_string(P) + " pipeline stages; pass one per stage (memopt plan writes them)");

  at::set_num_threads(o.threads);
  // Dropout differs per rank, as each replica draws its own masks.
  at::manual_seed(spec.seed * 1000003 + static_cast<uint64_t>(env.rank));
  model::BuiltModel built = model::build_model(profile.model);
  model::StagedModel& full = built.staged;
  if (full.num_stages() != chain.length())
    throw std::invalid_argument("the profile has " + std::to_string(chain.length()) + " stages but its model has " +
                                std::to_string(full.num_stages()));
  full.train(true);
  const model::Batch& batch = built.batch;
  model::StagedModel sub = full.slice(res.chain_begin, res.chain_end);
  const std::vector<at::Tensor> all_params = full.parameters();
  const std::vector<at::Tensor> sub_params = sub.parameters();
  std::unordered_map<const void*, int64_t> global_index;
  for (size_t i = 0; i < all_params.size(); ++i) global_index[all_params[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
  // Every parameter leaves its construction-time storage: this stage's for ZeRO's
  // buckets, the others' for nothing (another pipeline stage holds them).
  // The loss all-reduce's buffer, allocated once and before the baseline: c10d may
  // hold a collective's tensors a while after wait() returns.
  at::Tensor loss_buffer = at::zeros({1});
  const int64_t base_bytes = meter.current_bytes() - full.parameter_bytes();
  {
    std::set<const void*> mine;
    for (const at::Tensor& p : sub_params) mine.insert(p.unsafeGetTensorImpl());
    at::NoGradGuard no_grad;
    for (const at::Tensor& p : all_params)
      if (!mine.count(p.unsafeGetTensorImpl())) const_cast<at::Tensor&>(p).set_data(at::empty({0}));
  }

  // Schedules for this stage's sub-chain, at the rows a micro-batch has.
  const solver::Chain sub_chain =
      solver::scale_batch(solver::sub_chain(chain, res.chain_begin, res.chain_end), res.rows_per_micro_batch, B);
  std::vector<solver::Op> ops = solver::store_all_ops(sub_chain);
  const std::string src = o.schedules.empty() ? "the store-all schedule"
                          : k < static_cast<int>(o.schedule_sources.size()) ? o.schedule_sources[k]
                                                                              : "schedule " + std::to_string(k);
  if (!o.schedules.empty()) {
    const solver::Schedule& s = o.schedules[k];
    if (s.chain_length != sub_chain.length())
      throw std::invalid_argument(src + ": chain_length is " + std::to_string(s.chain_length) + " but pipeline stage " +
                                  std::to_string(k) + " runs " + std::to_string(sub_chain.length()) +
                                  " chain stages; make the schedules with `memopt plan --pipeline-stages " +
                                  std::to_string(P) + " ... --out S.json`");
    const solver::SimResult sim = solver::simulate_timeline(sub_chain, s.ops);
    if (!sim.valid) throw std::invalid_argument(src + ": /ops/" + std::to_string(sim.error_op) + ": " + sim.error);
    ops = s.ops;
  }

  // Groups: this replica's pipeline, this pipeline stage's replicas, and the
  // pipeline stages of this replica that share a (tied) parameter.
  std::shared_ptr<Comm> world = Comm::connect(env, o.comm);
  std::shared_ptr<Comm> pp = P > 1 ? world->subgroup("pp" + std::to_string(d), ranks_where(W, [&](int r) { return r / P == d; }))
                                   : nullptr;
  std::shared_ptr<Comm> dp = P > 1 ? world->subgroup("dp" + std::to_string(k), ranks_where(W, [&](int r) { return r % P == k; }))
                                   : world;
  std::map<std::set<int>, std::vector<int>> tied;  // pipeline stages sharing -> indices into sub_params
  if (P > 1) {
    std::unordered_map<const void*, std::set<int>> readers;
    for (int j = 0; j < P; ++j)
      for (int i = bounds[j]; i < bounds[j + 1]; ++i)
        for (const at::Tensor& p : full.stage(i).parameters) readers[p.unsafeGetTensorImpl()].insert(j);
    for (size_t i = 0; i < sub_params.size(); ++i) {
      const std::set<int>& who = readers.at(sub_params[i].unsafeGetTensorImpl());
      if (who.size() > 1) tied[who].push_back(static_cast<int>(i));
    }
    if (!tied.empty() && D > 1 && o.zero_stage >= 2)
      throw std::invalid_argument("--zero-stage " + std::to_string(o.zero_stage) +
                                  " with data and pipeline parallelism and parameters shared across pipeline stages "
                                  "(GPT-2's tied wte) is not supported; use --zero-stage 0 or 1, or one of the two");
  }
  std::map<std::set<int>, std::shared_ptr<Comm>> tied_groups;
  for (const auto& [who, idx] : tied) {
    std::string name = "tied" + std::to_string(d);
    std::vector<int> members;
    for (const int j : who) {
      name += "_" + std::to_string(j);
      members.push_back(d * P + j);
    }
    tied_groups[who] = world->subgroup(name, members);
  }

  ZeroEngine engine(sub, dp, o.zero_stage, o.adamw);
  // One copy engine per micro-batch in flight at once, each sized as `memopt run`
  // sizes its one.
  std::vector<std::unique_ptr<runtime::CpuCopyEngine>> engines;
  PipelineStage stage;
  if (const std::optional<runtime::CopyPlan> copies = runtime::plan_copies(sub_chain, ops, src)) {
    for (int i = 0; i < std::min(P - k, M); ++i) {
      engines.push_back(std::make_unique<runtime::CpuCopyEngine>(copies->engine));
      stage.copy_engines.push_back(engines.back().get());
    }
    stage.offload_done_before = copies->offload_done_before;
  }
  stage.model = &sub;
  stage.rank = k;
  stage.size = P;
  stage.group = pp.get();
  stage.ops = ops;
  stage.hooks = &engine;
  stage.loss_scale = 1.0 / (static_cast<double>(D) * M);
  std::vector<model::Batch> micro;
  for (int m = 0; m < M; ++m) {
    const int64_t row = d * (B / D) + m * res.rows_per_micro_batch;
    micro.push_back({batch.input.narrow(0, row, res.rows_per_micro_batch),
                     batch.targets.narrow(0, row, res.rows_per_micro_batch)});
  }

  const bool reporter = k == P - 1 && d == 0;
  for (int step = 1; step <= o.steps; ++step) {
    meter.reset_peak();
    const auto start = std::chrono::steady_clock::now();
    engine.begin_step();
    const PipelineStepResult r = run_1f1b(stage, micro);
    for (const auto& [who, idx] : tied)
      for (const int i : idx) {
        at::Tensor g = engine.accumulated_grad(i);
        tied_groups.at(who)->all_reduce_sum(g);
      }
    engine.finish_step();
    TrainStep s;
    if (k == P - 1) {
      loss_buffer.fill_(r.loss_sum / M);
      if (D > 1) dp->all_reduce_sum(loss_buffer);
      s.loss = loss_buffer.item<double>() / D;
    }
    s.time_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    s.peak_bytes = meter.peak_bytes() - base_bytes;
    res.max_in_flight = std::max(res.max_in_flight, r.max_in_flight);
    res.steps.push_back(s);
    if (reporter && o.log) {
      char line[160];
      std::snprintf(line, sizeof line, "step %d/%d  loss %.5f  %.1f ms  peak %s (rank %d)", step, o.steps, s.loss,
                    s.time_ms, solver::format_bytes(s.peak_bytes).c_str(), env.rank);
      o.log(line);
    }
  }
  // Gloo's worker drops its reference to a finished collective's tensors (the last
  // loss all-reduce) after wait() returns; one more collective through the same
  // worker guarantees it has, so that the reading below is what the engine keeps.
  dp->barrier();
  res.persistent_bytes = meter.current_bytes() - base_bytes;
  res.engine_persistent_bytes = engine.persistent_bytes();
  res.num_gathers = engine.num_gathers();

  if (!o.out_prefix.empty()) {
    // Note [Parameter files]: named by their index in the whole model's parameters().
    const std::vector<at::Tensor> values = engine.full_parameters();
    std::map<std::string, at::Tensor> tensors;
    for (size_t i = 0; i < sub_params.size(); ++i)
      tensors[std::to_string(global_index.at(sub_params[i].unsafeGetTensorImpl()))] = values[i].contiguous();
    const std::string stem = o.out_prefix + ".rank" + std::to_string(env.rank);
    model::write_safetensors(stem + ".safetensors", tensors);
    nlohmann::json steps = nlohmann::json::array();
    for (const TrainStep& s : res.steps)
      steps.push_back({{"loss", s.loss}, {"time_ms", s.time_ms}, {"peak_bytes", s.peak_bytes}});
    solver::write_json_atomic(stem + ".json",
                              {{"rank", env.rank},
                               {"world_size", W},
                               {"data_parallel", D},
                               {"pipeline_stages", P},
                               {"pipeline_stage", k},
                               {"chain_stages", {res.chain_begin, res.chain_end}},
                               {"zero_stage", o.zero_stage},
                               {"micro_batches", M},
                               {"rows_per_micro_batch", res.rows_per_micro_batch},
                               {"max_in_flight", res.max_in_flight},
                               {"num_gathers", res.num_gathers},
                               {"persistent_bytes", res.persistent_bytes},
                               {"engine_persistent_bytes", res.engine_persistent_bytes},
                               {"steps", steps}});
  }
  // Nobody leaves before everybody has written: a rank that exits early would make
  // the others' last collectives fail.
  world->barrier();
  return res;
}

}  // namespace memopt::distributed

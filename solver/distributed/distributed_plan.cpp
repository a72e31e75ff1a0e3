// distributed_plan.cpp: ZeRO's static bytes, 1F1B's in-flight count, then the DP.
#include "solver/distributed/distributed_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "solver/distributed/pipeline_partition.h"
#include "solver/chain/units.h"

namespace memopt::solver {

int data_parallel_ranks(const DistributedLayout& layout) { return layout.world_size / layout.pipeline_stages; }

int64_t micro_batch_rows(const DistributedLayout& layout) {
  return layout.batch_rows / (static_cast<int64_t>(data_parallel_ranks(layout)) * layout.micro_batches);
}

std::string stage_schedule_path(const std::string& out_path, int stage, int num_stages) {
  if (num_stages <= 1) return out_path;
  const auto dot = out_path.rfind(".json");
  return (dot == std::string::npos ? out_path : out_path.substr(0, dot)) + ".stage" + std::to_string(stage) + ".json";
}

std::vector<PipelineStagePlan> plan_distributed(const Chain& chain, const DistributedLayout& l, int64_t device_bytes,
                                                const SolveOptions& solve_options, const std::string& source) {
  if (l.world_size < 1)
    throw LayoutError("the world size must be at least 1 rank (got " + std::to_string(l.world_size) + ")");
  if (l.pipeline_stages < 1 || l.world_size % l.pipeline_stages != 0)
    throw LayoutError("the number of pipeline stages (" + std::to_string(l.pipeline_stages) +
                      ") must divide the world size (" + std::to_string(l.world_size) + " ranks)");
  if (l.micro_batches < 1)
    throw LayoutError("the number of micro-batches must be at least 1 (got " + std::to_string(l.micro_batches) + ")");
  const int D = data_parallel_ranks(l), P = l.pipeline_stages;
  if (l.batch_rows < 1) throw std::invalid_argument(source + ": /model/batch: missing; the plan splits the profiled batch");
  if (l.batch_rows % (static_cast<int64_t>(D) * l.micro_batches) != 0)
    throw std::invalid_argument(source + ": the batch of " + std::to_string(l.batch_rows) + " rows does not split into " +
                                std::to_string(D) + " data-parallel ranks x " + std::to_string(l.micro_batches) +
                                " micro-batches");
  const int64_t rows = micro_batch_rows(l);
  std::vector<int> bounds = pipeline_cuts(chain, P);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(chain.length());
  std::vector<PipelineStagePlan> out;
  for (int k = 0; k < P; ++k) {
    PipelineStagePlan s;
    s.begin = bounds[k];
    s.end = bounds[k + 1];
    const Chain sub = sub_chain(chain, s.begin, s.end);
    s.chain = scale_batch(sub, rows, l.batch_rows);
    s.zero = zero_memory(zero_buckets(sub, source), D, l.zero_stage);
    s.in_flight = std::min(P - k, l.micro_batches);
    s.activation_budget_bytes = device_bytes - s.zero.static_bytes();
    if (s.activation_budget_bytes <= 0)
      throw LayoutError("pipeline stage " + std::to_string(k) + ": ZeRO-" + std::to_string(l.zero_stage) + " leaves " +
                        format_bytes(s.zero.static_bytes()) + " per rank on a device of " + format_bytes(device_bytes) +
                        ", nothing for activations; raise the ZeRO stage, the world size or the number of pipeline "
                        "stages");
    s.micro_batch_budget_bytes = s.activation_budget_bytes / s.in_flight;
    SolveOptions o = solve_options;
    o.budget_bytes = s.micro_batch_budget_bytes;
    s.schedule = solve(s.chain, o);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace memopt::solver

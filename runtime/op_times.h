// op_times.h: a measured step's time split by where its ops ran (Note [Where an op
// runs] in solver/chain/op_context.h), beside what the chain model gives the same ops
// -- `memopt run --op-times`. Plain numbers: the durations come from a wall-clock
// tracer (measure/wall_clock_tracer.h) on the CPU testbed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "solver/chain/chain.h"
#include "solver/chain/op_context.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {

// A step's time in one context: its ops measured against the chain model's times for
// them (compute_cost in solver/chain/simulate.h).
struct OpTimeRow {
  solver::OpContext context = solver::OpContext::NotCompute;
  int num_ops = 0;          // in one step
  double measured_ms = 0;   // the median over the steps of the step's sum over these ops
  double predicted_ms = 0;  // the sum of the chain's times for these ops
};

// `op_ms_per_step[s][k]` is the measured time in step s of the k-th op of `ops` that
// is not the loss: the executor runs the loss between the forward and the backward,
// outside any op's range, so it is neither timed nor a row. One row per other context
// that occurs among the compute ops, in kOpContexts' order. Throws
// std::invalid_argument when a step's count differs from the ops'.
std::vector<OpTimeRow> op_time_rows(const solver::Chain& chain, const std::vector<solver::Op>& ops,
                                    const std::vector<std::vector<double>>& op_ms_per_step);

// A table for the CLI, a context a line: ops per step, measured and predicted ms, and
// measured over predicted; then the compute ops' total.
std::string format_op_time_rows(const std::vector<OpTimeRow>& rows);
// [{"context", "num_ops", "measured_ms", "predicted_ms"}, ...]
nlohmann::json op_time_rows_json(const std::vector<OpTimeRow>& rows);

}  // namespace memopt::runtime

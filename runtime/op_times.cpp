// op_times.cpp: a measured step's time by context, against the chain model's.
#include "runtime/op_times.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "common/stats.h"
#include "solver/chain/simulate.h"

namespace memopt::runtime {

std::vector<OpTimeRow> op_time_rows(const solver::Chain& chain, const std::vector<solver::Op>& ops,
                                    const std::vector<std::vector<double>>& op_ms_per_step) {
  // The k-th timed op of a step is the k-th op that is not the loss.
  std::vector<int> timed_index(ops.size(), -1);
  int num_timed = 0;
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].kind != solver::OpKind::Loss) timed_index[k] = num_timed++;
  for (size_t s = 0; s < op_ms_per_step.size(); ++s)
    if (static_cast<int>(op_ms_per_step[s].size()) != num_timed)
      throw std::invalid_argument("op_time_rows: step " + std::to_string(s) + " timed " +
                                  std::to_string(op_ms_per_step[s].size()) + " ops, the schedule has " +
                                  std::to_string(num_timed) + " besides the loss");
  const std::vector<solver::OpContext> contexts = solver::op_contexts(ops);
  std::vector<OpTimeRow> rows;
  for (const solver::OpContextInfo& info : solver::kOpContexts) {
    if (info.context == solver::OpContext::NotCompute || info.context == solver::OpContext::Loss) continue;
    OpTimeRow row;
    row.context = info.context;
    std::vector<double> sums(op_ms_per_step.size(), 0.0);
    for (size_t k = 0; k < ops.size(); ++k) {
      if (contexts[k] != info.context) continue;
      ++row.num_ops;
      row.predicted_ms += solver::compute_cost(chain, ops[k]).dur_ms;
      for (size_t s = 0; s < op_ms_per_step.size(); ++s) sums[s] += op_ms_per_step[s][timed_index[k]];
    }
    if (row.num_ops == 0) continue;
    row.measured_ms = sums.empty() ? 0.0 : common::median(sums);
    rows.push_back(row);
  }
  return rows;
}

std::string format_op_time_rows(const std::vector<OpTimeRow>& rows) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "  %-26s %6s %12s %13s %8s\n", "where the ops ran", "ops", "measured ms",
                "predicted ms", "/pred");
  out += line;
  OpTimeRow total;
  for (const OpTimeRow& r : rows) {
    std::snprintf(line, sizeof line, "  %-26s %6d %12.3f %13.3f %7.3fx\n", std::string(solver::context_word(r.context)).c_str(),
                  r.num_ops, r.measured_ms, r.predicted_ms, r.predicted_ms > 0 ? r.measured_ms / r.predicted_ms : 0.0);
    out += line;
    total.num_ops += r.num_ops;
    total.measured_ms += r.measured_ms;
    total.predicted_ms += r.predicted_ms;
  }
  std::snprintf(line, sizeof line, "  %-26s %6d %12.3f %13.3f %7.3fx\n", "every compute op", total.num_ops,
                total.measured_ms, total.predicted_ms,
                total.predicted_ms > 0 ? total.measured_ms / total.predicted_ms : 0.0);
  out += line;
  return out;
}

nlohmann::json op_time_rows_json(const std::vector<OpTimeRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const OpTimeRow& r : rows)
    out.push_back({{"context", std::string(solver::context_word(r.context))},
                   {"num_ops", r.num_ops},
                   {"measured_ms", r.measured_ms},
                   {"predicted_ms", r.predicted_ms}});
  return out;
}

}  // namespace memopt::runtime

// op_times.cpp: a measured step's time by context, against the chain model's.
#include "runtime/op_times.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/stats.h"
#include "solver/chain/simulate.h"

namespace memopt::runtime {

std::vector<OpTimeRow> op_time_rows(const solver::Chain& chain, const std::vector<solver::Op>& ops,
                                    const std::vector<std::vector<double>>& op_ms_per_step) {
  const std::vector<solver::OpContext> contexts = solver::op_contexts(ops);
  const size_t num_timed = ops.size() - static_cast<size_t>(std::count(contexts.begin(), contexts.end(),
                                                                       solver::OpContext::Loss));
  for (size_t s = 0; s < op_ms_per_step.size(); ++s)
    if (op_ms_per_step[s].size() != num_timed)
      throw std::invalid_argument("op_time_rows: step " + std::to_string(s) + " timed " +
                                  std::to_string(op_ms_per_step[s].size()) + " ops, the schedule has " +
                                  std::to_string(num_timed) + " besides the loss");
  // One pass over the ops, each context's row and per-step sums indexed by the context.
  constexpr size_t kNumContexts = std::size(solver::kOpContexts);
  std::vector<OpTimeRow> by_context(kNumContexts);
  std::vector<std::vector<double>> sums(kNumContexts, std::vector<double>(op_ms_per_step.size(), 0.0));
  size_t timed = 0;  // the k-th timed op of a step is the k-th op that is not the loss
  for (size_t k = 0; k < ops.size(); ++k) {
    if (contexts[k] == solver::OpContext::Loss) continue;
    const auto c = static_cast<size_t>(contexts[k]);
    ++by_context[c].num_ops;
    by_context[c].predicted_ms += solver::compute_cost(chain, ops[k], contexts[k] == solver::OpContext::BwdAfterItsKeep).dur_ms;
    for (size_t s = 0; s < op_ms_per_step.size(); ++s) sums[c][s] += op_ms_per_step[s][timed];
    ++timed;
  }
  std::vector<OpTimeRow> rows;
  for (const solver::OpContextInfo& info : solver::kOpContexts) {
    const auto c = static_cast<size_t>(info.context);
    OpTimeRow& row = by_context[c];
    if (info.context == solver::OpContext::NotCompute || row.num_ops == 0) continue;
    row.context = info.context;
    row.measured_ms = sums[c].empty() ? 0.0 : common::median(sums[c]);
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
  const auto print = [&](std::string_view word, const OpTimeRow& r) {
    std::snprintf(line, sizeof line, "  %-26s %6d %12.3f %13.3f %7.3fx\n", std::string(word).c_str(), r.num_ops,
                  r.measured_ms, r.predicted_ms, r.predicted_ms > 0 ? r.measured_ms / r.predicted_ms : 0.0);
    out += line;
  };
  OpTimeRow total;
  for (const OpTimeRow& r : rows) {
    print(solver::context_word(r.context), r);
    total.num_ops += r.num_ops;
    total.measured_ms += r.measured_ms;
    total.predicted_ms += r.predicted_ms;
  }
  print("every compute op", total);
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

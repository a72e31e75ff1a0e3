// fit_chart.cpp: the fit sweeps of `memopt estimate --fit-chart`.
#include "report/fit_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "report/text.h"
#include "solver/dp/baselines.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"
#include "solver/chain/units.h"

namespace memopt::report {

using namespace memopt::solver;

namespace {

solver::Chain chain_for(const gpt2::EstimateOptions& base, int64_t batch, int64_t seq) {
  gpt2::EstimateOptions o = base;
  o.workload = {batch, seq};
  // The position table grows with T: Note [Growing the position table] in gpt2/spec_choices.cpp.
  o.config.n_positions = std::max(o.config.n_positions, seq);
  return gpt2::estimate_gpt2(o).profile.chain;
}

// Time of the optimal plan at `budget`, or infinity when none fits.
double optimal_ms(const Chain& chain, int64_t budget, const FitOptions& o) {
  try {
    return solve(chain, {budget, SolverKind::Optimal, o.slots, o.threads, false}).predicted.time_ms;
  } catch (const InfeasibleBudget&) {
    return std::numeric_limits<double>::infinity();
  }
}

FitRow row_for(const FitOptions& o, int64_t batch, int64_t seq) {
  const Chain chain = chain_for(o.estimate, batch, seq);
  const double base = sum_fwd_bwd_ms(chain);
  FitRow r{batch, seq, {}, {}};
  const std::pair<const char*, std::vector<Op>> fixed[] = {{"store-all", store_all_ops(chain)},
                                                           {"sqrt", sqrt_ops(chain)},
                                                           {"recompute-blocks", recompute_blocks_ops(chain)},
                                                           {"recompute-all", recompute_all_ops(chain)}};
  for (const auto& [name, ops] : fixed) {
    const SimResult s = simulate_sequential(chain, ops);
    r.peak_bytes[name] = s.peak_bytes;
    r.overhead[name] = s.time_ms / base - 1.0;
  }
  const int64_t store_all = r.peak_bytes["store-all"];
  try {
    const Schedule s = solve(chain, {4 * store_all, SolverKind::OffloadAll, o.slots, o.threads, false});
    r.peak_bytes["offload-all"] = s.predicted.peak_bytes;
    r.overhead["offload-all"] = s.predicted.time_ms / base - 1.0;
  } catch (const std::exception&) {
  }
  // Smallest budget within the overhead cap, and smallest feasible: bisection on bytes.
  auto smallest = [&](const std::function<bool(int64_t)>& ok) {
    int64_t lo = 0, hi = store_all;  // store-all's budget always works (its time is the base)
    while (hi - lo > std::max<int64_t>(1, store_all / 1000)) {
      const int64_t mid = lo + (hi - lo) / 2;
      (ok(mid) ? hi : lo) = mid;
    }
    return hi;
  };
  const int64_t capped = smallest([&](int64_t b) { return optimal_ms(chain, b, o) <= (1.0 + o.max_overhead) * base; });
  r.peak_bytes["optimal<=10%"] = capped;
  r.overhead["optimal<=10%"] = optimal_ms(chain, capped, o) / base - 1.0;
  const int64_t any = smallest([&](int64_t b) { return std::isfinite(optimal_ms(chain, b, o)); });
  r.peak_bytes["optimal"] = any;
  r.overhead["optimal"] = optimal_ms(chain, any, o) / base - 1.0;
  return r;
}

// Does `strategy` fit `limit` at (batch, seq)?
bool fits(const FitOptions& o, const std::string& strategy, int64_t batch, int64_t seq, int64_t limit) {
  if (limit <= 0) return false;
  const Chain chain = chain_for(o.estimate, batch, seq);
  if (strategy == "optimal<=10%" || strategy == "optimal") {
    const double t = optimal_ms(chain, limit, o);
    return strategy == "optimal" ? std::isfinite(t) : t <= (1.0 + o.max_overhead) * sum_fwd_bwd_ms(chain);
  }
  std::vector<Op> ops;
  if (strategy == "store-all") ops = store_all_ops(chain);
  else if (strategy == "sqrt") ops = sqrt_ops(chain);
  else if (strategy == "recompute-blocks") ops = recompute_blocks_ops(chain);
  else if (strategy == "recompute-all") ops = recompute_all_ops(chain);
  else {
    try {
      solve(chain, {limit, SolverKind::OffloadAll, o.slots, o.threads, false});
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  return simulate_sequential(chain, ops).peak_bytes <= limit;
}

// Largest value in [1, max] (or [min, max]) for which ok holds, assuming monotone:
// doubling, then bisection. `multiple` keeps values multiples of it (seq: 64).
int64_t largest(const std::function<bool(int64_t)>& ok, int64_t min, int64_t max, int64_t multiple) {
  if (!ok(min)) return 0;
  int64_t lo = min, hi = min;
  while (hi < max) {
    const int64_t next = std::min(max, hi * 2);
    if (!ok(next)) { hi = next; break; }
    lo = hi = next;
  }
  if (lo == hi) return lo;  // max fits
  while (hi - lo > multiple) {
    const int64_t mid = (lo + (hi - lo) / 2) / multiple * multiple;
    if (mid <= lo) break;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

std::vector<std::string> fit_strategies() {
  return {"store-all", "sqrt", "recompute-blocks", "offload-all", "recompute-all", "optimal<=10%", "optimal"};
}

FitReport fit_chart(const FitOptions& o, const std::function<void(const std::string&)>& progress) {
  FitReport r;
  const gpt2::Estimate base = gpt2::estimate_gpt2(o.estimate);
  r.model = base.profile.model;
  r.device = base.profile.device;
  r.dtype = gpt2::info(o.estimate.dtype).word;
  r.memory_bytes = o.estimate.gpu.memory_bytes;
  r.static_bytes = base.profile.static_bytes;
  r.reserve_bytes = o.reserve_bytes;
  r.limit_bytes = r.memory_bytes - r.static_bytes - r.reserve_bytes;
  r.max_overhead = o.max_overhead;
  r.strategies = fit_strategies();
  const int64_t B = o.estimate.workload.batch, T = o.estimate.workload.seq_len;
  for (int64_t b = 1; b <= o.max_batch; b *= 2) {
    if (progress) progress("batch " + std::to_string(b) + " (seq " + std::to_string(T) + ")");
    r.by_batch.push_back(row_for(o, b, T));
    if (r.by_batch.back().peak_bytes["recompute-all"] > 2 * std::max<int64_t>(r.limit_bytes, 1) && b >= 2 * B) break;
  }
  for (int64_t t = 128; t <= o.max_seq; t *= 2) {
    if (progress) progress("seq " + std::to_string(t) + " (batch " + std::to_string(B) + ")");
    r.by_seq.push_back(row_for(o, B, t));
    if (r.by_seq.back().peak_bytes["recompute-all"] > 2 * std::max<int64_t>(r.limit_bytes, 1) && t >= 2 * T) break;
  }
  for (const std::string& s : r.strategies) {
    if (progress) progress("largest batch and seq for " + s);
    r.largest_batch[s] = largest([&](int64_t b) { return fits(o, s, b, T, r.limit_bytes); }, 1, o.max_batch, 1);
    r.largest_seq[s] = largest([&](int64_t t) { return fits(o, s, B, t, r.limit_bytes); }, 64, o.max_seq, 64);
  }
  return r;
}

nlohmann::ordered_json to_json(const FitReport& r) {
  auto rows = [](const std::vector<FitRow>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const FitRow& row : v)
      a.push_back({{"batch", row.batch}, {"seq", row.seq}, {"peak_bytes", row.peak_bytes}, {"overhead", row.overhead}});
    return a;
  };
  return {{"format", "memopt.fit"},
          {"version", 1},
          {"measured", false},
          {"command", r.command},
          {"model", r.model},
          {"device", r.device},
          {"dtype", r.dtype},
          {"memory_bytes", r.memory_bytes},
          {"static_bytes", r.static_bytes},
          {"reserve_bytes", r.reserve_bytes},
          {"limit_bytes", r.limit_bytes},
          {"max_overhead", r.max_overhead},
          {"strategies", r.strategies},
          {"by_batch", rows(r.by_batch)},
          {"by_seq", rows(r.by_seq)},
          {"largest_batch", r.largest_batch},
          {"largest_seq", r.largest_seq}};
}

std::vector<Figure> fit_figures(const std::string& dir) {
  return existing_figures(dir, {{"fit_chart.png",
                                 "Modeled activation memory of each strategy versus batch size (left) and sequence "
                                 "length (right); the dashed line is the GPU's memory minus static bytes and reserve."}});
}

std::string fit_readme(const FitReport& r, const std::vector<Figure>& figures) {
  std::ostringstream o;
  const std::string preset = r.model.value("preset", std::string("custom"));
  std::string gpu = r.device.value("name", std::string("?"));
  if (const auto at = gpu.find(" (modeled)"); at != std::string::npos) gpu.erase(at);
  const int64_t T = r.model.value("seq_len", int64_t{0}), B = r.model.value("batch", int64_t{0});
  o << "# Will GPT-2 " << preset << " fit on the " << gpu << "? (MODELED)\n\n";
  o << "Everything here is **modeled, not measured**: activation bytes from memopt's analytic twin of GPT-2 scaled "
       "to "
    << r.dtype << ", times from a roofline of the GPU's datasheet peaks (gpt2/estimate.h, gpt2/gpu_specs.h). "
       "No GPU was used.\n\n## Claim\n\n";
  const int64_t sa = r.largest_batch.at("store-all"), opt = r.largest_batch.at("optimal<=10%");
  o << "- Activation memory available: " << format_bytes(r.memory_bytes) << " - " << format_bytes(r.static_bytes)
    << " static (parameters, gradients, AdamW state: 16 B/parameter) - " << format_bytes(r.reserve_bytes)
    << " reserve = **" << format_bytes(r.limit_bytes) << "**.\n";
  if (r.limit_bytes <= 0) o << "- The static state alone does not fit: no batch fits without sharding (ZeRO) or a larger GPU.\n";
  o << "- At sequence length " << T << ": the largest batch that fits is **" << sa << " with store-all** and **" << opt
    << " with memopt's optimal plan at <= " << format_number("%.0f", 100 * r.max_overhead) << "% modeled overhead**";
  if (sa > 0 && opt > 0) o << " (" << format_number("%.1f", static_cast<double>(opt) / static_cast<double>(sa)) << "x)";
  o << "; with any overhead, " << r.largest_batch.at("optimal") << ".\n";
  o << "- At batch " << B << ": the longest sequence (multiple of 64) is " << r.largest_seq.at("store-all")
    << " with store-all and " << r.largest_seq.at("optimal<=10%") << " with optimal at <= "
    << format_number("%.0f", 100 * r.max_overhead) << "% overhead.\n\n";
  o << "## Reproduce\n\n```sh\n" << r.command << "\n```\n\n";
  o << figures_markdown(figures);
  o << "## Largest batch (seq " << T << ") and sequence (batch " << B << ") per strategy\n\n"
    << "| strategy | largest batch | largest seq | overhead at batch " << B << ", seq " << T << " |\n|---|---|---|---|\n";
  for (const std::string& s : r.strategies) {
    std::string ov = "-";
    for (const FitRow& row : r.by_batch)
      if (row.batch == B && row.overhead.count(s)) ov = format_number("%+.1f%%", 100 * row.overhead.at(s));
    o << "| " << s << " | " << r.largest_batch.at(s) << " | " << r.largest_seq.at(s) << " | " << ov << " |\n";
  }
  o << "\n`optimal<=10%` is memopt's optimal solver (recompute and offload over "
    << r.device.value("link", std::string("the host link")) << ") held to at most "
    << format_number("%.0f", 100 * r.max_overhead) << "% modeled time overhead over store-all; `optimal` is its smallest feasible "
       "budget whatever the time. Overheads are modeled; on a real GPU, kernels reach a fraction of the peaks and the "
       "ratios shift.\n\n## Activation memory versus batch size (seq "
    << T << ")\n\n| batch |";
  for (const std::string& s : r.strategies) o << " " << s << " |";
  o << "\n|---|";
  for (size_t i = 0; i < r.strategies.size(); ++i) o << "---|";
  o << "\n";
  for (const FitRow& row : r.by_batch) {
    o << "| " << row.batch << " |";
    for (const std::string& s : r.strategies)
      o << " " << (row.peak_bytes.count(s) ? format_bytes(row.peak_bytes.at(s)) : std::string("-")) << " |";
    o << "\n";
  }
  o << "\nAll numbers: `fit.json`.\n";
  return o.str();
}

}  // namespace memopt::report

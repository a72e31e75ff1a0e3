// tradeoff.cpp: the trade-off sweep, its JSON and its README.
#include "report/tradeoff.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/host.h"
#include "common/stats.h"
#include "report/solver_comparison.h"
#include "report/text.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/simulate.h"
#include "solver/chain/units.h"

namespace memopt::report {

using namespace memopt::solver;

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.push_back("");
  return parts;
}

std::string ops_key(const std::vector<Op>& ops) {
  std::string key;
  for (const Op& op : ops) key += to_string(op) + ";";
  return key;
}

std::string percent_label(int64_t bytes, int64_t reference) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * static_cast<double>(bytes) / static_cast<double>(reference));
  return buf;
}

nlohmann::ordered_json measured_json(const MeasuredPoint& m) {
  nlohmann::ordered_json j = {{"peak_bytes", m.peak_bytes},   {"reserved_peak_bytes", m.reserved_peak_bytes},
                              {"time_ms", m.time_ms.median}, {"time_q25_ms", m.time_ms.q25},
                              {"time_q75_ms", m.time_ms.q75}, {"steps", m.steps},
                              {"warmup_steps", m.warmup_steps}};
  if (m.max_abs_grad_diff) j["max_abs_grad_diff"] = *m.max_abs_grad_diff;
  if (!m.same_ops_as.empty()) j["same_ops_as"] = m.same_ops_as;
  if (m.predicted_in_rounds_ms) j["predicted_in_rounds_ms"] = *m.predicted_in_rounds_ms;
  return j;
}

MeasuredPoint measured_from_json(const nlohmann::json& j) {
  MeasuredPoint m;
  m.peak_bytes = j.at("peak_bytes").get<int64_t>();
  m.reserved_peak_bytes = j.at("reserved_peak_bytes").get<int64_t>();
  m.time_ms = {j.at("time_ms").get<double>(), j.at("time_q25_ms").get<double>(), j.at("time_q75_ms").get<double>()};
  m.steps = j.at("steps").get<int>();
  m.warmup_steps = j.at("warmup_steps").get<int>();
  if (j.contains("max_abs_grad_diff")) m.max_abs_grad_diff = j["max_abs_grad_diff"].get<double>();
  m.same_ops_as = j.value("same_ops_as", std::string());
  if (j.contains("predicted_in_rounds_ms")) m.predicted_in_rounds_ms = j["predicted_in_rounds_ms"].get<double>();
  return m;
}

}  // namespace

std::vector<int64_t> parse_budget_list(const std::string& text, int64_t reference_bytes) {
  std::vector<int64_t> out;
  auto one = [&](const std::string& part) {
    try {
      return parse_budget(part, reference_bytes);
    } catch (const std::exception& e) {
      throw std::invalid_argument("--budgets: '" + part + "': " + e.what());
    }
  };
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> range = split(item, ':');
    if (range.size() == 1) {
      out.push_back(one(item));
    } else if (range.size() == 3) {
      const int64_t lo = one(range[0]), hi = one(range[1]), step = one(range[2]);
      if (step <= 0 || lo > hi)
        throw std::invalid_argument("--budgets: '" + item + "' is not first:last:step with first <= last and step > 0");
      if ((hi - lo) / step > 1000) throw std::invalid_argument("--budgets: '" + item + "' has over 1000 budgets");
      // Budgets computed as first + k * step so that rounding does not accumulate; the
      // last one is included when the step lands on it (within a byte per step).
      for (int64_t k = 0; lo + k * step <= hi + k; ++k) {
        const int64_t v = lo + k * step;
        out.push_back(v >= hi - k ? hi : v);  // "20%:100%:5%" ends exactly at 100%
      }
    } else {
      throw std::invalid_argument("--budgets: '" + item + "' is neither a budget nor first:last:step");
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) throw std::invalid_argument("--budgets: no budget given");
  if (out.front() <= 0) throw std::invalid_argument("--budgets: budgets must be positive");
  return out;
}

// Note [Stage categories]
// One colour per stage and budget must summarise solver::StageActivity. Offloading
// wins (it is the rarest and costs link time, not compute): "offloaded" when the
// stage's input went to the host, "saved-offloaded" when only the saved state of its
// fwd_keep did (its input and output stay); then a stage run once and stored is "kept"; a
// recomputed stage is "checkpointed" when its own input is
// the checkpoint it restarts from (fwd_ckpt on it) and "recomputed" when it is
// rebuilt from an earlier checkpoint (fwd_drop). The count of extra forwards is
// kept beside the category for the map's labels.
std::string stage_category(const StageActivity& a) {
  if (a.input_offloaded) return "offloaded";
  if (a.saved_offloaded) return "saved-offloaded";
  if (a.num_recomputes() == 0) return "kept";
  if (a.num_ckpts > 0) return "checkpointed";
  return "recomputed";
}

std::vector<SolverKind> default_tradeoff_solvers(const Chain& chain) {
  std::vector<SolverKind> out = {SolverKind::Optimal,      SolverKind::RecomputeOnly, SolverKind::Sqrt,
                                 SolverKind::RecomputeBlocks, SolverKind::RecomputeAll, SolverKind::StoreAll,
                                 SolverKind::OffloadAll};
  for (const SolverKind kind : {SolverKind::Selective, SolverKind::Pointwise})
    if (solver::solver_needs(kind, chain).empty()) out.push_back(kind);
  return out;
}

TradeoffReport sweep(const Profile& profile, const TradeoffOptions& options, const MeasureFn& measure,
                     const ProgressFn& progress) {
  const Chain& chain = profile.chain;
  TradeoffReport r;
  r.model = profile.model;
  r.profile_device = profile.device;
  r.profile_measured = profile.measured;
  r.slots = options.slots;
  if (chain.link) r.link_bytes_per_s = chain.link->d2h_bytes_per_s;
  const std::vector<Op> store_all = store_all_ops(chain);
  r.store_all_peak_bytes = store_all_peak_bytes(chain);
  r.base_time_ms = sum_fwd_bwd_ms(chain);
  for (const Stage& s : chain.stages) r.stage_names.push_back(s.name);
  r.budgets_bytes = options.budgets_bytes;
  for (SolverKind k : options.solvers) r.solvers.emplace_back(info(k).word);

  // Every point is solved first; then the distinct schedules, store-all without a
  // budget first, are measured together (Note [Measurement protocol]).
  std::vector<Schedule> distinct;
  std::vector<std::string> first_seen_at;  // where each distinct schedule first appeared
  std::map<std::string, size_t> index_of;  // ops -> index in distinct
  std::vector<std::optional<size_t>> point_schedule;
  if (measure) {
    Schedule base{"store-all", r.store_all_peak_bytes, chain.length(), {}, store_all};
    base.predicted = {r.store_all_peak_bytes, r.base_time_ms};
    index_of[ops_key(store_all)] = 0;
    distinct.push_back(base);
    first_seen_at.push_back("store-all@unbudgeted");
  }
  const int total = static_cast<int>(options.budgets_bytes.size() * options.solvers.size());
  // Note [Known plans] in solver/search/optimal.cpp: `optimal` is offered every plan it found at
  // a smaller budget, so that its time never grows with the budget.
  std::vector<std::pair<int64_t, std::vector<Op>>> optimal_plans;
  for (int64_t budget : options.budgets_bytes) {
    // Note [Tables shared between solves] in solver/search/table_shelf.h: one shelf per budget.
    const auto tables = std::make_shared<RecomputeTableShelf>();
    for (size_t k = 0; k < options.solvers.size(); ++k) {
      const SolverKind kind = options.solvers[k];
      drop_unread_tables(*tables, std::span<const SolverKind>(options.solvers).subspan(k));
      TradeoffPoint p;
      p.solver = std::string(info(kind).word);
      p.budget_bytes = budget;
      SolveOptions o{budget, kind, options.slots, options.threads, false};
      o.tables = tables;
      if (kind == SolverKind::Optimal)
        for (const auto& [below, plan] : optimal_plans)
          if (below <= budget) o.known_plans.push_back(plan);
      const SolveAttempt attempt = attempt_solve(chain, o);
      if (kind == SolverKind::Optimal && attempt.schedule) optimal_plans.emplace_back(budget, attempt.schedule->ops);
      // A plan over its own budget (rotor-compat) is refused, as `memopt solve` refuses it.
      if (attempt.outcome == Outcome::OverBudget) throw std::runtime_error(attempt.error);
      p.status = outcome_word(attempt.outcome);
      point_schedule.emplace_back();
      if (attempt.schedule) {
        const Schedule& s = *attempt.schedule;
        p.predicted_peak_bytes = s.predicted.peak_bytes;
        p.predicted_time_ms = s.predicted.time_ms;
        p.num_ops = static_cast<int>(s.ops.size());
        for (const StageActivity& a : stage_activity(chain, s.ops))
          p.stages.push_back({stage_category(a), a.num_recomputes(), describe(a)});
        if (measure) {
          const auto [it, inserted] = index_of.emplace(ops_key(s.ops), distinct.size());
          if (inserted) {
            distinct.push_back(s);
            first_seen_at.push_back(p.solver + "@" + percent_label(budget, r.store_all_peak_bytes));
          }
          point_schedule.back() = it->second;
        }
      }
      r.points.push_back(p);
      if (progress) progress(static_cast<int>(r.points.size()), total, r.points.back());
    }
  }
  if (measure) {
    const std::vector<MeasuredPoint> measured = measure(distinct);
    if (measured.size() != distinct.size()) throw std::logic_error("sweep: one measurement per schedule expected");
    r.measured_base = measured[0];
    std::vector<bool> reported(distinct.size(), false);
    for (size_t k = 0; k < r.points.size(); ++k) {
      if (!point_schedule[k]) continue;
      const size_t d = *point_schedule[k];
      MeasuredPoint m = measured[d];
      // The first point with these ops carries the measurement; later ones name it.
      if (d == 0 || reported[d]) m.same_ops_as = first_seen_at[d];
      reported[d] = true;
      r.points[k].measured = m;
    }
  }
  if (options.find_min_budgets) {
    for (SolverKind kind : options.solvers) {
      SolveOptions so{0, kind, options.slots, options.threads, false};
      int64_t min_budget = -1;
      try {
        min_budget = min_feasible_budget(chain, so);
      } catch (const std::invalid_argument&) {
      }
      r.min_budget_bytes[std::string(info(kind).word)] = min_budget;
    }
  }
  return r;
}

bool measured_faster_than_store_all(const TradeoffReport& r, const TradeoffPoint& p) {
  if (!p.measured || !r.measured_base) return false;
  return common::below_beyond_spread(p.measured->time_ms, r.measured_base->time_ms);
}

nlohmann::ordered_json to_json(const TradeoffReport& r) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const TradeoffPoint& p : r.points) {
    nlohmann::ordered_json j = {{"solver", p.solver}, {"budget_bytes", p.budget_bytes}, {"status", p.status}};
    if (p.status == "ok") {
      j["predicted"] = {{"peak_bytes", p.predicted_peak_bytes}, {"time_ms", p.predicted_time_ms}};
      j["num_ops"] = p.num_ops;
      nlohmann::ordered_json stages = nlohmann::ordered_json::array();
      for (const StagePlan& s : p.stages)
        stages.push_back({{"category", s.category}, {"num_recomputes", s.num_recomputes}, {"description", s.description}});
      j["stages"] = stages;
    }
    if (p.measured) {
      j["measured"] = measured_json(*p.measured);
      j["measured"]["faster_than_store_all"] = measured_faster_than_store_all(r, p);
    }
    points.push_back(j);
  }
  nlohmann::ordered_json j = {{"format", "memopt.tradeoff"},
                      {"version", 1},
                      {"command", r.command},
                      {"profile", r.profile_path},
                      {"profile_measured", r.profile_measured},
                      {"model", r.model},
                      {"profile_device", r.profile_device},
                      {"machine", r.machine},
                      {"slots", r.slots},
                      {"store_all_peak_bytes", r.store_all_peak_bytes},
                      {"base_time_ms", r.base_time_ms},
                      {"stage_names", r.stage_names},
                      {"budgets_bytes", r.budgets_bytes},
                      {"solvers", r.solvers},
                      {"min_budget_bytes", r.min_budget_bytes},
                      {"points", points}};
  j["link_bytes_per_s"] = r.link_bytes_per_s ? nlohmann::ordered_json(*r.link_bytes_per_s) : nlohmann::ordered_json(nullptr);
  if (r.measured_base) j["measured_base"] = measured_json(*r.measured_base);
  j["predicted_times"] = r.predicted_times;
  return j;
}

TradeoffReport tradeoff_from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", std::string()) != "memopt.tradeoff")
    throw std::invalid_argument("/format: not \"memopt.tradeoff\"; regenerate with `memopt tradeoff`");
  if (j.value("version", 0) != 1) throw std::invalid_argument("/version: only version 1 is known");
  try {
    TradeoffReport r;
    r.command = j.at("command").get<std::string>();
    r.profile_path = j.at("profile").get<std::string>();
    r.profile_measured = j.at("profile_measured").get<bool>();
    r.model = j.at("model");
    r.profile_device = j.at("profile_device");
    r.machine = j.at("machine");
    r.slots = j.at("slots").get<int>();
    if (!j.at("link_bytes_per_s").is_null()) r.link_bytes_per_s = j["link_bytes_per_s"].get<double>();
    r.store_all_peak_bytes = j.at("store_all_peak_bytes").get<int64_t>();
    r.base_time_ms = j.at("base_time_ms").get<double>();
    r.stage_names = j.at("stage_names").get<std::vector<std::string>>();
    r.budgets_bytes = j.at("budgets_bytes").get<std::vector<int64_t>>();
    r.solvers = j.at("solvers").get<std::vector<std::string>>();
    r.min_budget_bytes = j.at("min_budget_bytes").get<std::map<std::string, int64_t>>();
    if (j.contains("measured_base")) r.measured_base = measured_from_json(j["measured_base"]);
    r.predicted_times = j.value("predicted_times", std::string("profile"));
    for (const nlohmann::json& pj : j.at("points")) {
      TradeoffPoint p;
      p.solver = pj.at("solver").get<std::string>();
      p.budget_bytes = pj.at("budget_bytes").get<int64_t>();
      p.status = pj.at("status").get<std::string>();
      if (p.status == "ok") {
        p.predicted_peak_bytes = pj.at("predicted").at("peak_bytes").get<int64_t>();
        p.predicted_time_ms = pj.at("predicted").at("time_ms").get<double>();
        p.num_ops = pj.at("num_ops").get<int>();
        for (const nlohmann::json& s : pj.at("stages"))
          p.stages.push_back({s.at("category").get<std::string>(), s.at("num_recomputes").get<int>(),
                              s.at("description").get<std::string>()});
      }
      if (pj.contains("measured")) p.measured = measured_from_json(pj["measured"]);
      r.points.push_back(p);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("tradeoff.json: ") + e.what() + "; regenerate with `memopt tradeoff`");
  }
}

nlohmann::json this_machine() {
  const std::string cpu = common::cpu_model_name();
  utsname u{};
  std::string os = ::uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown";
  return {{"cpu", cpu}, {"cores", common::hardware_threads()}, {"os", os}};
}

namespace {

std::string device_name(const TradeoffReport& r) {
  std::string name = r.profile_device.value("name", std::string("?"));
  if (const auto at = name.find(" (modeled)"); at != std::string::npos) name.erase(at);
  return name;
}

const TradeoffPoint* find_point(const TradeoffReport& r, const std::string& solver, int64_t budget) {
  for (const TradeoffPoint& p : r.points)
    if (p.solver == solver && p.budget_bytes == budget) return &p;
  return nullptr;
}

}  // namespace

std::vector<Figure> tradeoff_figures(const std::string& dir) {
  return existing_figures(
      dir, {{"overhead_vs_budget.png",
             "Time overhead over store-all versus activation budget, one colour per solver: lines are predicted by "
             "the simulator, markers are measured (when --run)."},
            {"stage_map.png", "What the optimal plan does to each stage at each budget (predicted plan)."},
            {"predicted_vs_measured.png",
             "Measured against predicted activation peak and step time, one point per distinct schedule; the "
             "diagonal is a perfect prediction."}});
}

std::string tradeoff_readme(const TradeoffReport& r, const std::vector<Figure>& figures) {
  const bool any_measured = r.measured_base.has_value();
  const double ref = static_cast<double>(r.store_all_peak_bytes);
  auto pct = [&](int64_t b) { return format_number("%.0f%%", 100.0 * static_cast<double>(b) / ref); };
  auto overhead = [&](double t, double base) { return format_number("%+.1f%%", 100.0 * (t / base - 1.0)); };
  std::ostringstream o;
  // "gpt2 tiny" for a preset; otherwise the shape, as far as the profile gives it.
  std::string model_name = r.model.value("name", std::string("model"));
  if (r.model.contains("preset")) {
    model_name += " " + r.model.value("preset", std::string());
  } else if (r.model.contains("n_layer") && r.model.contains("n_embd")) {
    model_name += " (" + std::to_string(r.model.value("n_layer", 0)) + " layers, C=" +
                  std::to_string(r.model.value("n_embd", 0));
    if (r.model.contains("granularity")) model_name += ", " + r.model.value("granularity", std::string()) + " stages";
    model_name += ")";
  }
  o << "# Memory/time trade-off: " << model_name << " ("
    << (r.profile_measured ? "profile MEASURED on " : "profile MODELED for ")
    << device_name(r) << ")\n\n";

  // The claim, from the numbers.
  o << "## Claim\n\n";
  const auto opt_min = r.min_budget_bytes.find("optimal");
  if (opt_min != r.min_budget_bytes.end() && opt_min->second > 0)
    o << "- The optimal plan fits in as little as **" << format_bytes(opt_min->second) << "** of activations ("
      << pct(opt_min->second) << " of store-all's " << format_bytes(r.store_all_peak_bytes) << ", predicted).\n";
  // The smallest budget at which optimal stays within 10% (predicted), and what the
  // fixed strategies cost there.
  for (int64_t b : r.budgets_bytes) {
    const TradeoffPoint* p = find_point(r, "optimal", b);
    if (!p || p->status != "ok" || p->predicted_time_ms > 1.10 * r.base_time_ms) continue;
    o << "- At " << pct(b) << " of the store-all peak (" << format_bytes(b) << ") the optimal plan is predicted "
      << overhead(p->predicted_time_ms, r.base_time_ms) << " slower than store-all";
    if (p->measured && r.measured_base)
      o << " (measured " << overhead(p->measured->time_ms.median, r.measured_base->time_ms.median) << ")";
    o << "; it is the smallest budget of this sweep within 10% (predicted).";
    const TradeoffPoint* sq = find_point(r, "sqrt", b);
    if (sq && sq->status == "ok")
      o << " sqrt there: " << overhead(sq->predicted_time_ms, r.base_time_ms) << " predicted.";
    o << "\n";
    break;
  }
  if (any_measured) {
    std::vector<double> peak_ratio, time_ratio, in_rounds_ratio;
    for (const TradeoffPoint& p : r.points) {
      if (!p.measured || !p.measured->same_ops_as.empty()) continue;
      peak_ratio.push_back(static_cast<double>(p.measured->peak_bytes) / static_cast<double>(p.predicted_peak_bytes));
      time_ratio.push_back(p.measured->time_ms.median / p.predicted_time_ms);
      if (p.measured->predicted_in_rounds_ms)
        in_rounds_ratio.push_back(p.measured->time_ms.median / *p.measured->predicted_in_rounds_ms);
    }
    if (!peak_ratio.empty()) {
      auto [pmin, pmax] = std::minmax_element(peak_ratio.begin(), peak_ratio.end());
      auto [tmin, tmax] = std::minmax_element(time_ratio.begin(), time_ratio.end());
      o << "- Over the " << peak_ratio.size() << " distinct schedules run, measured/predicted peak is "
        << format_number("%.3f", *pmin) << " to " << format_number("%.3f", *pmax) << " and measured/predicted time " << format_number("%.2f", *tmin)
        << " to " << format_number("%.2f", *tmax) << ".\n";
    }
    if (!in_rounds_ratio.empty()) {
      auto [rmin, rmax] = std::minmax_element(in_rounds_ratio.begin(), in_rounds_ratio.end());
      o << "- Predicted instead from stage times taken in the measured rounds (`predicted_in_rounds_ms` in "
           "tradeoff.json; docs/measurement.md, \"Stage times from the measured rounds\"), measured/predicted time is "
        << format_number("%.2f", *rmin) << " to " << format_number("%.2f", *rmax) << ".\n";
    }
    std::vector<std::string> faster;
    for (const TradeoffPoint& p : r.points)
      if (p.measured && p.measured->same_ops_as.empty() && measured_faster_than_store_all(r, p))
        faster.push_back(p.solver + " at " + pct(p.budget_bytes));
    if (!faster.empty()) {
      o << "- **Flagged:** measured faster than store-all beyond both interquartile ranges: ";
      for (size_t k = 0; k < faster.size(); ++k) o << (k ? ", " : "") << faster[k];
      o << ". A plan that stores less does at least store-all's compute, so this is the testbed (memory "
           "traffic, caches), not the plan; the table marks these cells with (!).\n";
    }
  }
  o << "\n## Reproduce\n\n```sh\n" << r.command << "\n```\n\n";
  o << "- Profile: `" << r.profile_path << "`, "
    << (r.profile_measured ? "**measured**" : "**modeled** (not measured: analytic bytes, roofline times)") << ", device "
    << device_name(r) << ".\n";
  o << "- This report ran on: " << r.machine.value("cpu", std::string("?")) << ", " << r.machine.value("cores", 0)
    << " cores, " << r.machine.value("os", std::string("?"));
  if (r.machine.contains("run_device") && r.machine.at("run_device") != r.machine.value("cpu", std::string()))
    o << "; the measured steps trained on the " << r.machine.at("run_device").get<std::string>();
  o << ".\n";
  o << "- Solver: memory discretised in " << r.slots << " slots; link "
    << (r.link_bytes_per_s ? format_bandwidth(*r.link_bytes_per_s) : std::string("none (offload-all not possible)"));
  if (r.profile_device.contains("link_emulation")) {
    const nlohmann::json& e = r.profile_device["link_emulation"];
    o << ", which **emulates** a " << e.value("gpu", "?") << " (" << e.value("dtype", "?") << ") over "
      << e.value("link", "?") << " (" << format_bandwidth(e.value("link_bytes_per_s", 0.0))
      << "): the copy link scaled by this machine's compute rate on this model ("
      << format_number("%.3g", e.value("testbed_flop_per_s", 0.0) / 1e9) << " GFLOP/s) over the GPU's ("
      << format_number("%.3g", e.value("gpu_flop_per_s", 0.0) / 1e12) << " TFLOP/s, roofline), docs/formats.md, \"Where the numbers come from\"";
  }
  o << ".\n";
  o << "- **predicted** = memopt's simulator (docs/formats.md, \"Operations and memory without offload: the sequential simulator\" and \"Offload: the timeline simulator\") on the profile"
    << (r.predicted_times == "this process"
            ? ", its stage times re-measured in the measuring process before the measured rounds (bytes from the "
              "profile)"
            : "")
    << "; "
    << (any_measured ? "**measured** = real training steps (AdamW) on this machine: every distinct schedule runs " +
                           std::to_string(r.measured_base->warmup_steps) +
                           " warm-up steps, then " + std::to_string(r.measured_base->steps) +
                           " measured steps in interleaved rounds (A B C A B C ...), all in one process; times are "
                           "medians with the interquartile range (IQR); time overhead is relative to store-all "
                           "measured the same way (" +
                           format_number("%.2f ms", r.measured_base->time_ms.median) + ", IQR " +
                           format_number("%.2f", r.measured_base->time_ms.q25) + "-" +
                           format_number("%.2f ms", r.measured_base->time_ms.q75) +
                           "). Peaks are allocated bytes, which plans count; the allocator's reserved bytes are in "
                           "tradeoff.json. Identical schedules are measured once."
                     : "nothing was measured (run with --run to add measured numbers).")
    << "\n- Overhead = time / (every stage forward and backward once) - 1; store-all's predicted time is "
    << format_number("%.3f ms", r.base_time_ms) << ".\n\n";

  o << figures_markdown(figures);

  o << "## Table\n\nOverhead and peak per solver and budget ("
    << (any_measured ? "predicted / measured [measured IQR]" : "predicted")
    << "; `-` = no plan of that solver fits).\n\n| budget |";
  for (const std::string& s : r.solvers) o << " " << s << " |";
  o << "\n|---|";
  for (size_t i = 0; i < r.solvers.size(); ++i) o << "---|";
  o << "\n";
  for (int64_t b : r.budgets_bytes) {
    o << "| " << pct(b) << " (" << format_bytes(b) << ") |";
    for (const std::string& s : r.solvers) {
      const TradeoffPoint* p = find_point(r, s, b);
      if (!p || p->status != "ok") {
        o << " " << (p && p->status == "needs-link" ? "needs link" : "-") << " |";
        continue;
      }
      o << " " << overhead(p->predicted_time_ms, r.base_time_ms);
      if (p->measured && r.measured_base) {
        const double base = r.measured_base->time_ms.median;
        o << " / " << overhead(p->measured->time_ms.median, base) << " [" << overhead(p->measured->time_ms.q25, base)
          << ", " << overhead(p->measured->time_ms.q75, base) << "]";
        if (measured_faster_than_store_all(r, *p)) o << " (!)";
      }
      o << ", " << format_bytes(p->predicted_peak_bytes);
      if (p->measured) o << " / " << format_bytes(p->measured->peak_bytes);
      o << " |";
    }
    o << "\n";
  }
  o << "\nSmallest budget each solver can meet (predicted): ";
  bool first = true;
  for (const auto& [s, b] : r.min_budget_bytes) {
    o << (first ? "" : ", ") << s << " " << (b > 0 ? format_bytes(b) + " (" + pct(b) + ")" : std::string("none"));
    first = false;
  }
  o << ".\n\nAll numbers: `tradeoff.json` (format memopt.tradeoff, version 1).\n";
  return o.str();
}

}  // namespace memopt::report

// report_table.cpp: plain-text tables for the CLI.
#include "tools/report_table.h"

#include <cstdio>

#include "report/solver_comparison.h"
#include "solver/chain/summary.h"
#include "solver/chain/units.h"

namespace memopt::tools {

using namespace memopt::solver;

std::string solver_words(const std::string& separator) {
  std::string out;
  for (const auto& k : kSolverKinds) out += (out.empty() ? "" : separator) + std::string(k.word);
  return out;
}

void print_profile_header(const std::string& path, const Profile& profile, int64_t store_all_peak_bytes) {
  const Chain& c = profile.chain;
  std::printf("profile  %s: %d stages, %s\n", path.c_str(), c.length(),
              profile.measured ? "measured" : "modeled (not measured)");
  std::printf("         store-all peak %s, fwd+bwd once %.2f ms, static (params+grads+optimizer) %s\n",
              format_bytes(store_all_peak_bytes).c_str(), sum_fwd_bwd_ms(c), format_bytes(profile.static_bytes).c_str());
}

void print_solver_comparison(const Chain& chain, const SolveOptions& options, const report::SolveAttempt& chosen) {
  const double base_ms = sum_fwd_bwd_ms(chain);
  std::printf("  %-18s %-6s %12s %10s %12s\n", "solver", "fits", "time (ms)", "overhead", "peak");
  for (const report::SolverRow& row : report::compare_solvers(chain, options, &chosen)) {
    const char* mark = row.kind == options.solver ? "*" : " ";
    const std::string word(info(row.kind).word);
    switch (row.attempt.outcome) {
      case report::Outcome::Fits: {
        const Schedule& s = *row.attempt.schedule;
        std::printf("%s %-18s %-6s %12.2f %9.1f%% %12s\n", mark, word.c_str(), "yes", s.predicted.time_ms,
                    100.0 * (s.predicted.time_ms / base_ms - 1.0), format_bytes(s.predicted.peak_bytes).c_str());
        break;
      }
      case report::Outcome::Infeasible:
        std::printf("%s %-18s %-6s %12s %10s %12s\n", mark, word.c_str(), "no", "-", "-", "-");
        break;
      case report::Outcome::NeedsLink:
        std::printf("%s %-18s %-6s %12s %10s %12s\n", mark, word.c_str(), "-", "-", "-", "needs a link");
        break;
      case report::Outcome::NeedsRoles:
        std::printf("%s %-18s %-6s %12s %10s %12s\n", mark, word.c_str(), "-", "-", "-", "needs op stages");
        break;
      case report::Outcome::OverBudget:
        std::printf("%s %-18s %-6s %12s %10s %12s\n", mark, word.c_str(), "over", "-", "-", "over budget");
        break;
    }
  }
  std::printf("  (overhead over running every stage forward and backward once, i.e. store-all's time)\n");
}

void print_stage_activity(const Chain& chain, const std::vector<Op>& ops) {
  const auto activity = stage_activity(chain, ops);
  int start = 0;
  for (int i = 1; i <= chain.length(); ++i) {
    if (i < chain.length() && describe(activity[i]) == describe(activity[start])) continue;
    const std::string range = i - 1 == start ? std::to_string(start) : std::to_string(start) + "-" + std::to_string(i - 1);
    const std::string names = i - 1 == start ? chain.stages[start].name
                                             : chain.stages[start].name + " .. " + chain.stages[i - 1].name;
    std::printf("  %-8s %-28s %s\n", range.c_str(), names.c_str(), describe(activity[start]).c_str());
    start = i;
  }
}

}  // namespace memopt::tools

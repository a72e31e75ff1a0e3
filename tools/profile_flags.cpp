// profile_flags.cpp: --bandwidth and --slots as solve, tradeoff and plan read them.
#include "tools/profile_flags.h"

#include <stdexcept>

#include "solver/units.h"

namespace memopt::tools {

void apply_bandwidth_flag(solver::Profile& profile, const std::string& bandwidth_text) {
  if (bandwidth_text.empty()) return;
  if (bandwidth_text == "none") {
    profile.chain.link.reset();
    return;
  }
  try {
    const double bytes_per_s = solver::parse_bandwidth(bandwidth_text);
    profile.chain.link = solver::Link{bytes_per_s, bytes_per_s};
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--bandwidth: ") + e.what());
  }
}

void check_problem_size_flags(const solver::Chain& chain, const solver::SolveOptions& options,
                              const std::string& profile_path) {
  const std::string e = solver::check_problem_size(chain, options);
  if (e.empty()) return;
  throw std::invalid_argument(e.starts_with("/") ? profile_path + ": " + e
                                                 : "--slots " + std::to_string(options.slots) + ": " + e);
}

}  // namespace memopt::tools

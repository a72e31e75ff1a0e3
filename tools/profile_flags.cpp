// profile_flags.cpp: --bandwidth and --slots as solve, tradeoff and plan read them.
#include "tools/profile_flags.h"

#include <stdexcept>

#include "gpt2/link_emulation.h"

namespace memopt::tools {

void apply_bandwidth_flag(solver::Profile& profile, const std::string& bandwidth_text) {
  if (bandwidth_text.empty()) return;
  try {
    gpt2::set_link_bandwidth(profile, bandwidth_text);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--bandwidth: ") + e.what());
  }
}

void apply_emulate_flag(solver::Profile& profile, const std::string& emulate_text,
                        const std::string& bandwidth_text) {
  if (emulate_text.empty()) return;
  if (!bandwidth_text.empty())
    throw std::invalid_argument("--emulate and --bandwidth both set the link; give one of them");
  try {
    gpt2::apply_link_emulation(profile, gpt2::emulate_link(profile, emulate_text));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--emulate: ") + e.what());
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

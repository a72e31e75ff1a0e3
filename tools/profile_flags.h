// profile_flags.h: the flags several commands apply to a profile they read --
// --bandwidth and --emulate, which override its host link, and --slots, whose problem-size check
// must name the flag (or the profile's field) the user can change.
#pragma once

#include <string>

#include "solver/io/profile_json.h"
#include "solver/search/solve.h"

namespace memopt::tools {

// "" keeps the profile's link; "none" drops it (solve as if nothing could be
// offloaded); anything else is a bandwidth for both directions ("16GB/s", "1e10").
// Throws std::invalid_argument prefixed "--bandwidth: ".
void apply_bandwidth_flag(solver::Profile& profile, const std::string& bandwidth_text);

// "" keeps the profile's link; "GPU[:LINK[:DTYPE]]" sets it to that GPU's link at the
// testbed's speed (Note [Emulated link] in gpt2/link_emulation.h) and records the
// emulation in the profile. Throws std::invalid_argument prefixed "--emulate: ";
// with --bandwidth too, refuses both.
void apply_emulate_flag(solver::Profile& profile, const std::string& emulate_text,
                        const std::string& bandwidth_text = "");

// check_problem_size for `options`, thrown as std::invalid_argument naming what to
// change: the profile's field (the check's message starts with its JSON path) or --slots.
void check_problem_size_flags(const solver::Chain& chain, const solver::SolveOptions& options,
                              const std::string& profile_path);

}  // namespace memopt::tools

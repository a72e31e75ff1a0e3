// offload_brute_force.h: every schedule of the offload class (Note [The offload
// schedule class] in solver/dp/offload.h), enumerated from its definition and
// simulated with the docs/formats.md, "Offload: the timeline simulator" simulator -- the plain
// reference the offload DP is
// compared with. Shares nothing with solver/dp/offload.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver::testing {

struct OffloadCandidate {
  std::vector<Op> ops;
  int64_t peak_bytes = 0;
  double time_ms = 0;
};

// Every schedule of the class for this chain (its link included) that obeys the
// class's copy-window rules, simulated. Exponential: L <= 5.
std::vector<OffloadCandidate> all_offload_class_schedules(const Chain& chain);

// The fastest candidate with peak <= budget_bytes, or nullopt.
std::optional<OffloadCandidate> fastest_offload_fitting(const std::vector<OffloadCandidate>& all, int64_t budget_bytes);

}  // namespace memopt::solver::testing

// link_check.h: what a device's copy engine achieves in the three situations a
// schedule puts it in -- each direction alone, both directions at once (a full-duplex
// link runs both at full rate), and both while the compute stream multiplies
// matrices (offloads are meant to hide behind compute) -- with the compute's own time
// alone and beside the copies. What `memopt link` reports. MEASURED, on this machine.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "common/stats.h"

namespace memopt::runtime {

struct LinkCheckOptions {
  c10::Device device{c10::kCPU};
  // The CPU engine's emulated rates (0: memcpy speed); a GPU's link is its own.
  double d2h_cap_bytes_per_s = 0;
  double h2d_cap_bytes_per_s = 0;
  int64_t num_bytes = int64_t{64} << 20;  // per copy
  int repeat = 5;                         // measured rounds, after one warm-up round
  int64_t matmul_size = 1024;             // n of the n x n float products the compute runs
  int num_matmuls = 8;                    // per round, queued right after the copies
};

// Rates in bytes per second and times in ms, each the spread over the rounds.
struct LinkCheck {
  common::Spread d2h_alone, h2d_alone;
  common::Spread d2h_duplex, h2d_duplex;
  common::Spread d2h_under_compute, h2d_under_compute;
  common::Spread compute_alone_ms, compute_beside_copies_ms;
};

// Throws std::invalid_argument for counts below 1 or a device without a copy engine.
LinkCheck check_link(const LinkCheckOptions& options);

// {"device", "bytes", "repeat", "d2h_alone_bytes_per_s": {median, q25, q75}, ...}.
nlohmann::ordered_json link_check_json(const LinkCheckOptions& options, const LinkCheck& check);

}  // namespace memopt::runtime

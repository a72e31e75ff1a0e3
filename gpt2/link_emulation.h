// link_emulation.h: `--emulate GPU:LINK` -- the copy link the CPU testbed gives its
// copy engine so that moving an activation costs, relative to computing it, what it
// costs on that GPU over that link. The compute rates come from the profile's own
// FLOPs and times (testbed) and from the roofline of gpt2/estimate.h (GPU).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gpt2/estimate.h"
#include "gpt2/gpu_specs.h"
#include "solver/io/profile_json.h"

namespace memopt::gpt2 {

// Note [Emulated link]
// On a GPU, offloading a_k hides behind compute when x_k / link <= the compute it
// overlaps; the testbed computes about a thousand times slower than a GPU but
// copies at memory speed, so every offload looked free. An emulated link keeps the
// GPU's ratio of copy time to compute time:
//   emulated_bytes_per_s = link_bytes_per_s * testbed_flop_per_s / gpu_flop_per_s
//                          * (testbed dtype bytes / GPU dtype bytes)
// testbed_flop_per_s = the step's FLOPs (forward FLOPs of gpt2_stage_ops, times 3:
// Note [Roofline]) over the profile's measured forward + backward times, so it is
// what this machine reached on this model. gpu_flop_per_s = the same FLOPs over the
// roofline time of the same stages on that GPU (stage_forward_roofline_ms, times 3):
// the GPU's rate on this model's mix of matmuls and memory-bound ops, not its peak.
// The last factor is 1 when the GPU trains in the profile's dtype (the default); to
// emulate a GPU training in bf16 while the testbed trains fp32, the testbed's
// activations are twice the GPU's bytes, so the link is twice as fast for the same
// copy time.
struct LinkEmulation {
  std::string gpu;   // gpu_specs word, aliases resolved
  std::string link;  // kLinkSpecs word
  std::string dtype; // the GPU's training dtype ("fp32", "bf16", ...)
  double link_bytes_per_s = 0;
  double testbed_flop_per_s = 0;
  double gpu_flop_per_s = 0;
  double emulated_bytes_per_s = 0;
};

// Parses "GPU[:LINK[:DTYPE]]" (e.g. "h100-sxm:pcie5", "gh200", "a100:pcie4:bf16"); the
// link defaults to the GPU's own, the dtype to the profile's. Throws
// std::invalid_argument naming the bad part and the known words.
LinkEmulation emulate_link(const solver::Profile& profile, const std::string& text);

// The profile with its link set to the emulation's rate both ways and the emulation
// recorded under device.link_emulation (docs/formats.md, "profile.json").
void apply_link_emulation(solver::Profile& profile, const LinkEmulation& emulation);

nlohmann::ordered_json to_json(const LinkEmulation& emulation);

// The profile's link from one word, as `memopt solve --bandwidth` and the Python
// package read it: "none" removes the link, a bandwidth ("16GB/s", both directions)
// sets it; either drops a recorded emulation.
void set_link_bandwidth(solver::Profile& profile, const std::string& bandwidth_text);
// The same, also taking "GPU[:LINK[:DTYPE]]" (emulate_link) for any text that does
// not start with a digit and is not "none".
void set_link(solver::Profile& profile, const std::string& text);

}  // namespace memopt::gpt2

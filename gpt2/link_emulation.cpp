// link_emulation.cpp: Note [Emulated link] in numbers.
#include "gpt2/link_emulation.h"

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "gpt2/config.h"
#include "solver/chain/units.h"

namespace memopt::gpt2 {
namespace {

std::vector<std::string> split_colons(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  return parts;
}

}  // namespace

LinkEmulation emulate_link(const solver::Profile& profile, const std::string& text) {
  const std::vector<std::string> parts = split_colons(text);
  if (parts.empty() || parts.size() > 3 || parts[0].empty())
    throw std::invalid_argument("emulated link '" + text + "': expected GPU[:LINK[:DTYPE]], e.g. h100-sxm:pcie5");
  const auto gpu = gpu_spec(parts[0]);
  if (!gpu) throw std::invalid_argument("emulated link '" + text + "': unknown GPU '" + parts[0] + "'; known GPUs: " + gpu_words());
  LinkSpec link = gpu_link(*gpu);
  if (parts.size() >= 2 && !parts[1].empty()) {
    const auto l = link_spec(parts[1]);
    if (!l) throw std::invalid_argument("emulated link '" + text + "': unknown link '" + parts[1] + "'; known links: " + link_words());
    link = *l;
  }
  const std::string profile_dtype_name = profile.model.value("dtype", std::string("float32"));
  Dtype testbed_dtype = Dtype::Fp32;
  for (const DtypeInfo& d : kDtypes)
    if (profile_dtype_name == d.json_name) testbed_dtype = d.value;
  Dtype gpu_dtype = testbed_dtype;
  if (parts.size() == 3) {
    const auto d = dtype_from_word(parts[2]);
    if (!d) throw std::invalid_argument("emulated link '" + text + "': unknown dtype '" + parts[2] + "'; use fp32, fp16 or bf16");
    gpu_dtype = *d;
  }
  if (!profile.measured)
    throw std::invalid_argument("emulated link: the profile is modeled (memopt estimate); it already has that GPU's own "
                                "link, so there is nothing to emulate");
  Gpt2Spec spec;
  try {
    spec = gpt2_spec_from_json(profile.model);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("emulated link: needs a GPT-2 profile to count its FLOPs (") + e.what() +
                                "); for another model give the link as a bandwidth, e.g. 16GB/s");
  }
  const auto ops = gpt2_stage_ops(spec.config, spec.workload, testbed_dtype);
  const solver::Chain& chain = profile.chain;
  if (static_cast<int>(ops.size()) != chain.length())
    throw std::invalid_argument("emulated link: the profile has " + std::to_string(chain.length()) +
                                " stages but its model has " + std::to_string(ops.size()) + "; regenerate the profile");
  // The GPU's ops move its dtype's bytes; the FLOPs are the same in every dtype.
  const auto gpu_ops = gpt2_stage_ops(spec.config, spec.workload, gpu_dtype);
  double step_flop = 0, gpu_ms = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const RooflineOp& op : ops[i]) step_flop += 3 * op.flop;  // Note [Roofline]: backward = 2x forward
    gpu_ms += 3 * stage_forward_roofline_ms(gpu_ops[i], *gpu, gpu_dtype);
  }
  const double testbed_ms = solver::sum_fwd_bwd_ms(chain);
  if (!(testbed_ms > 0) || !(gpu_ms > 0) || !(step_flop > 0))
    throw std::invalid_argument("emulated link: the profile's stage times are zero; regenerate it with memopt profile");
  LinkEmulation e;
  e.gpu = std::string(gpu->word);
  e.link = std::string(link.word);
  e.dtype = info(gpu_dtype).word;
  e.link_bytes_per_s = link.bytes_per_s;
  e.testbed_flop_per_s = step_flop / (testbed_ms / 1e3);
  e.gpu_flop_per_s = step_flop / (gpu_ms / 1e3);
  const double dtype_factor = static_cast<double>(info(testbed_dtype).bytes) / static_cast<double>(info(gpu_dtype).bytes);
  e.emulated_bytes_per_s = e.link_bytes_per_s * e.testbed_flop_per_s / e.gpu_flop_per_s * dtype_factor;
  return e;
}

nlohmann::ordered_json to_json(const LinkEmulation& e) {
  return {{"gpu", e.gpu},
          {"link", e.link},
          {"dtype", e.dtype},
          {"link_bytes_per_s", e.link_bytes_per_s},
          {"testbed_flop_per_s", e.testbed_flop_per_s},
          {"gpu_flop_per_s", e.gpu_flop_per_s},
          {"emulated_bytes_per_s", e.emulated_bytes_per_s}};
}

void apply_link_emulation(solver::Profile& profile, const LinkEmulation& e) {
  profile.chain.link = solver::Link{e.emulated_bytes_per_s, e.emulated_bytes_per_s};
  profile.device["link_emulation"] = to_json(e);
}

void set_link_bandwidth(solver::Profile& profile, const std::string& bandwidth_text) {
  profile.device.erase("link_emulation");  // the link is no longer the emulated one
  if (bandwidth_text == "none") {
    profile.chain.link.reset();
    return;
  }
  const double bytes_per_s = solver::parse_bandwidth(bandwidth_text);
  profile.chain.link = solver::Link{bytes_per_s, bytes_per_s};
}

void set_link(solver::Profile& profile, const std::string& text) {
  if (text == "none" || (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0])))) {
    set_link_bandwidth(profile, text);
    return;
  }
  apply_link_emulation(profile, emulate_link(profile, text));
}

}  // namespace memopt::gpt2

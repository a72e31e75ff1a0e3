// profile_json.h: profile.json (docs/formats.md, "profile.json") to and from Profile. The
// reader validates at the border: every error names the file, the JSON path of the
// field and the fix; what it returns, the solver trusts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "solver/chain/chain.h"
#include "solver/io/format_error.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// A profile: the chain plus what it describes. `model` and `device` are kept as
// JSON objects because the runtime, not the solver, interprets them; they keep their
// keys in the order they were given (by the code that built them, or the file).
struct Profile {
  Chain chain;
  nlohmann::ordered_json model = nlohmann::ordered_json::object();
  nlohmann::ordered_json device = nlohmann::ordered_json::object();
  bool measured = true;
  int64_t static_bytes = 0;
};

// The device kind and model dtype a profile records, for its schedules
// (Schedule::profiled_on): "device.kind" ("cpu", "cuda", or a modeled GPU's "name"),
// and "model.dtype" ("float32" when absent).
ProfiledOn profiled_on(const Profile& p);

// `source` names the file in error messages.
Profile profile_from_json(const nlohmann::ordered_json& j, const std::string& source);
// Keys in the order of docs/formats.md, "How memopt writes its JSON files" (Note [Key order in
// written files]).
nlohmann::ordered_json profile_to_json(const Profile& p);

// The text of a file named `source`: what read_profile does after reading it (the
// fuzz targets of tests/fuzz call this on arbitrary bytes).
Profile parse_profile(std::string_view text, const std::string& source);
Profile read_profile(const std::string& path);

}  // namespace memopt::solver

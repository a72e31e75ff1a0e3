// io.h: profile.json and schedule.json (docs/formats.md sections 2-3) to and from the solver's
// structs. Readers validate at the border: every error names the file, the JSON path
// of the field and the fix.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "solver/chain.h"
#include "solver/format_error.h"
#include "solver/read_file.h"
#include "solver/schedule.h"
#include "solver/schedule_check.h"
#include "solver/units.h"

namespace memopt::solver {

// A profile: the chain plus what it describes. `model` and `device` are kept as
// JSON objects because the runtime, not the solver, interprets them.
struct Profile {
  Chain chain;
  nlohmann::json model = nlohmann::json::object();
  nlohmann::json device = nlohmann::json::object();
  bool measured = true;
  int64_t static_bytes = 0;
};

// `source` names the file in error messages.
Profile profile_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json profile_to_json(const Profile& p);
Schedule schedule_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json schedule_to_json(const Schedule& s);

// The text of a file named `source`: what read_profile / read_schedule do after
// reading it (the fuzz targets of tests/fuzz call these on arbitrary bytes).
Profile parse_profile(std::string_view text, const std::string& source);
Schedule parse_schedule(std::string_view text, const std::string& source);
Profile read_profile(const std::string& path);
Schedule read_schedule(const std::string& path);
// The text write_json_atomic writes: 2-space indent, keys in the order of docs/formats.md section 2.9 (others
// after them, alphabetically), each array of scalars -- an op -- on one line.
// Throws std::invalid_argument for NaN or infinity, which JSON cannot hold.
std::string format_json(const nlohmann::json& j);
// Through write_file_atomic (solver/atomic_file.h): never half a file.
void write_json_atomic(const std::string& path, const nlohmann::json& j);

}  // namespace memopt::solver

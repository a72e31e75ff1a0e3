// schedule_json.h: schedule.json (docs/formats.md, "schedule.json") to and from Schedule. The
// reader checks the format of every op and that its index exists in a chain of
// /chain_length stages; whether the ops make a valid step is the simulator's question
// (schedule_check.h).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "solver/io/format_error.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// `source` names the file in error messages.
Schedule schedule_from_json(const nlohmann::ordered_json& j, const std::string& source);
// Keys in the order of docs/formats.md, "How memopt writes its JSON files" (Note [Key order in
// written files]).
nlohmann::ordered_json schedule_to_json(const Schedule& s);

// The text of a file named `source`: what read_schedule does after reading it (the
// fuzz targets of tests/fuzz call this on arbitrary bytes).
Schedule parse_schedule(std::string_view text, const std::string& source);
Schedule read_schedule(const std::string& path);

}  // namespace memopt::solver

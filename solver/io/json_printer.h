// json_printer.h: the text of every JSON file memopt writes, and short excerpts of
// JSON values for error messages. It only lays values out; what goes in a file, and
// in which order, is up to the code that builds the value.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace memopt::solver {

// Note [Key order in written files]: files list their keys in a fixed order
// (docs/formats.md, "How memopt writes its JSON files"), so that every file reads alike and diffs stay
// small. The order lives where each object is built: the writers (profile_to_json,
// schedule_to_json, and whoever adds keys to what they return) build
// nlohmann::ordered_json, which keeps keys in insertion order, and the printer keeps
// that order. A plain nlohmann::json converts on the way in with its keys sorted
// alphabetically, the only order it holds.

// 2-space indent, keys in the order `j` holds them, each array of scalars -- an op,
// a param_reads entry -- on one line, no newline at the end. Throws
// std::invalid_argument naming the JSON path for NaN or infinity, which JSON cannot
// hold (nlohmann would write null, which no reader accepts back).
std::string format_json(const nlohmann::ordered_json& j);

// format_json(j) and a newline, through write_file_atomic (solver/io/atomic_file.h):
// never half a file, and a value that cannot be written costs nothing of the old one.
void write_json_atomic(const std::string& path, const nlohmann::ordered_json& j);

// A value on one line of at most 40 characters, for messages: "nan" and "inf" for the
// numbers JSON cannot spell, "..." where it was cut.
std::string json_excerpt(const nlohmann::ordered_json& v);

}  // namespace memopt::solver

// json_reader.h: what the readers of profile.json and schedule.json share -- the
// format words, the parse of a file's text, and JsonReader, which takes a parsed
// document apart field by field. Every failure is a FormatError
// "<file>: <JSON path>: <what is wrong>; <fix>" (docs/formats.md, "Errors", "Errors").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "solver/io/format_error.h"

namespace memopt::solver {

// Every file says what it is (`format`) and which layout of it (`version`).
inline constexpr std::string_view kProfileFormat = "memopt.profile";
inline constexpr std::string_view kScheduleFormat = "memopt.schedule";
inline constexpr int64_t kFormatVersion = 1;

// The JSON in `text`, its objects' keys in the file's order (so that a file read and
// written back keeps it). ordered_json finds a key by a linear search, so an object
// of n keys costs O(n^2) to parse: nothing for memopt's objects of a dozen keys, a
// few seconds for a 50,000-key map passed by mistake (which then fails its /format
// check). Throws FormatError "<source>: not valid JSON: ...; <fix>", or for values
// nested deeper than any memopt file.
nlohmann::ordered_json parse_json_text(std::string_view text, const std::string& source, const std::string& fix);

// "null", "an object", "an array", or the kind and an excerpt: "a string (\"12\")".
std::string describe_json(const nlohmann::ordered_json& v);

// One document of `source`; `fix` ends every message unless a call gives its own.
class JsonReader {
 public:
  JsonReader(std::string source, std::string fix);

  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  [[noreturn]] void fail_with_fix(const std::string& path, const std::string& what, const std::string& fix) const;
  // For messages that already start with their JSON path (validate()).
  [[noreturn]] void fail_raw(const std::string& path_and_what) const;

  void expect_object(const nlohmann::ordered_json& v, const std::string& path) const;
  void expect_array(const nlohmann::ordered_json& v, const std::string& path) const;

  // Absent and null both mean "not given" for optional fields: Python writes None as null.
  const nlohmann::ordered_json* optional(const nlohmann::ordered_json& object, const char* key) const;
  const nlohmann::ordered_json& required(const nlohmann::ordered_json& object, const std::string& path,
                                         const char* key) const;

  // A whole number that fits int64. `kind` completes "sizes are integers in bytes".
  int64_t integer(const nlohmann::ordered_json& v, const std::string& path, const char* kind) const;
  int64_t non_negative_bytes(const nlohmann::ordered_json& v, const std::string& path) const;
  double finite(const nlohmann::ordered_json& v, const std::string& path) const;
  double non_negative_ms(const nlohmann::ordered_json& v, const std::string& path) const;
  std::string string(const nlohmann::ordered_json& v, const std::string& path) const;
  bool boolean(const nlohmann::ordered_json& v, const std::string& path) const;

  // `format` says what the file is and `version` which layout of it; both first, so
  // that a schedule passed as a profile gets that message, not a missing field.
  void check_header(const nlohmann::ordered_json& root, std::string_view format, std::string_view other_format,
                    const std::string& what_it_is, const std::string& wrong_file_fix) const;

 private:
  std::string source_;
  std::string fix_;
};

}  // namespace memopt::solver

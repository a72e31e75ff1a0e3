// json_reader.cpp: the parse and the typed field reads of json_reader.h.
#include "solver/io/json_reader.h"

#include <cmath>
#include <limits>
#include <utility>

#include "solver/io/json_printer.h"

namespace memopt::solver {

using nlohmann::ordered_json;

namespace {

// Our formats nest four levels deep. Deeper input is garbage or an attack, and
// nlohmann copies and prints values recursively, so a file of 100,000 nested
// brackets would overflow the stack later instead of failing here.
constexpr int kMaxDepth = 64;

}  // namespace

ordered_json parse_json_text(std::string_view text, const std::string& source, const std::string& fix) {
  const ordered_json::parser_callback_t limit_depth = [&](int depth, ordered_json::parse_event_t, ordered_json&) {
    if (depth > kMaxDepth)
      throw FormatError(source + ": values nest deeper than " + std::to_string(kMaxDepth) +
                        " levels, far beyond any memopt file; " + fix);
    return true;
  };
  try {
    return ordered_json::parse(text, limit_depth);
  } catch (const ordered_json::exception& e) {
    // nlohmann's text starts with "[json.exception.parse_error.101] "; the id helps nobody.
    std::string what = e.what();
    if (const auto end = what.find("] "); what.starts_with("[json.exception.") && end != std::string::npos)
      what.erase(0, end + 2);
    // Python's json.dump writes NaN and Infinity, which are not JSON: say so, since
    // "invalid literal" alone sends people looking for a typo.
    if (const auto at = what.find("last read: '"); at != std::string::npos) {
      const std::string read = what.substr(at + 12, what.find('\'', at + 12) - (at + 12));
      const std::string token = read.substr(read.find_last_of(" :,[") == std::string::npos ? 0 : read.find_last_of(" :,[") + 1);
      if (token.starts_with("N") || token.starts_with("I") || token.starts_with("-I"))
        what += " (NaN and Infinity are not JSON numbers: a value was not measured or overflowed)";
    }
    throw FormatError(source + ": not valid JSON: " + what + "; " + fix);
  }
}

std::string describe_json(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::null: return "null";
    case ordered_json::value_t::object: return "an object";
    case ordered_json::value_t::array: return "an array";
    case ordered_json::value_t::string: return "a string (" + json_excerpt(v) + ")";
    case ordered_json::value_t::boolean: return "a boolean (" + json_excerpt(v) + ")";
    default: return "a number (" + json_excerpt(v) + ")";
  }
}

JsonReader::JsonReader(std::string source, std::string fix) : source_(std::move(source)), fix_(std::move(fix)) {}

void JsonReader::fail(const std::string& path, const std::string& what) const { fail_with_fix(path, what, fix_); }

void JsonReader::fail_with_fix(const std::string& path, const std::string& what, const std::string& fix) const {
  throw FormatError(source_ + ": " + path + ": " + what + "; " + fix);
}

void JsonReader::fail_raw(const std::string& path_and_what) const {
  throw FormatError(source_ + ": " + path_and_what + "; " + fix_);
}

void JsonReader::expect_object(const ordered_json& v, const std::string& path) const {
  if (!v.is_object()) fail(path, "expected an object, found " + describe_json(v));
}

void JsonReader::expect_array(const ordered_json& v, const std::string& path) const {
  if (!v.is_array()) fail(path, "expected an array, found " + describe_json(v));
}

const ordered_json* JsonReader::optional(const ordered_json& object, const char* key) const {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const ordered_json& JsonReader::required(const ordered_json& object, const std::string& path, const char* key) const {
  const auto it = object.find(key);
  if (it == object.end()) fail(path + "/" + key, "missing, but it is required");
  return *it;
}

int64_t JsonReader::integer(const ordered_json& v, const std::string& path, const char* kind) const {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, json_excerpt(v) + " is larger than the largest 64-bit integer (9223372036854775807)");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    // Tools that write every number as a double (4e9, 25165824.0) are fine as long
    // as the value is whole; 1.5 bytes is a bug upstream, not something to round.
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(path, json_excerpt(v) + " is not a finite number");
    if (d != std::floor(d)) fail(path, json_excerpt(v) + " is not a whole number, but " + kind);
    if (d >= 0x1p63 || d < -0x1p63)  // 2^63: the first double above every int64
      fail(path, json_excerpt(v) + " is larger than the largest 64-bit integer (9223372036854775807)");
    return static_cast<int64_t>(d);
  }
  fail(path, std::string("expected a whole number (") + kind + "), found " + describe_json(v));
}

int64_t JsonReader::non_negative_bytes(const ordered_json& v, const std::string& path) const {
  const int64_t n = integer(v, path, "sizes are integers in bytes");
  if (n < 0) fail(path, std::to_string(n) + " is negative, but sizes are byte counts (>= 0)");
  return n;
}

double JsonReader::finite(const ordered_json& v, const std::string& path) const {
  if (!v.is_number()) fail(path, "expected a number, found " + describe_json(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(path, json_excerpt(v) + " is not a finite number");
  return d;
}

double JsonReader::non_negative_ms(const ordered_json& v, const std::string& path) const {
  const double d = finite(v, path);
  if (d < 0) fail(path, json_excerpt(v) + " is negative, but times are durations in ms (>= 0)");
  return d;
}

std::string JsonReader::string(const ordered_json& v, const std::string& path) const {
  if (!v.is_string()) fail(path, "expected a string, found " + describe_json(v));
  return v.get<std::string>();
}

bool JsonReader::boolean(const ordered_json& v, const std::string& path) const {
  if (!v.is_boolean()) fail(path, "expected true or false, found " + describe_json(v));
  return v.get<bool>();
}

void JsonReader::check_header(const ordered_json& root, std::string_view format, std::string_view other_format,
                              const std::string& what_it_is, const std::string& wrong_file_fix) const {
  expect_object(root, "/");
  const auto it = root.find("format");
  if (it == root.end())
    fail("/format", "missing, so this is not a " + what_it_is + " (it must say \"format\": \"" +
                        std::string(format) + "\")");
  const std::string word = string(*it, "/format");
  if (word == other_format)
    fail_with_fix("/format", "\"" + word + "\" is not \"" + std::string(format) + "\": this file is not a " +
                                 what_it_is, wrong_file_fix);
  if (word != format) fail("/format", "\"" + word + "\" is not \"" + std::string(format) + "\"");
  const int64_t version = integer(required(root, "", "version"), "/version", "versions are integers");
  if (version != kFormatVersion)
    fail("/version", std::to_string(version) + " is not a version this memopt reads (it reads " +
                         std::to_string(kFormatVersion) + ")");
}

}  // namespace memopt::solver

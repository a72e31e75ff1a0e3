// json_printer.cpp: the layout of Note [Key order in written files], one value at a time.
#include "solver/io/json_printer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "solver/io/atomic_file.h"

namespace memopt::solver {
namespace {

using nlohmann::ordered_json;

std::string indent(int depth) { return std::string(2 * static_cast<size_t>(depth), ' '); }

void emit(const ordered_json& v, int depth, const std::string& path, std::string& out) {
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin()) out += ",\n";
      out += indent(depth + 1) + ordered_json(it.key()).dump() + ": ";
      emit(it.value(), depth + 1, path + "/" + it.key(), out);
    }
    out += '\n';
    out += indent(depth);
    out += '}';
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    // An array of scalars -- an op such as ["fwd_keep", 3] -- stays on one line, so a
    // schedule reads and diffs one op per line.
    const bool flat = std::none_of(v.begin(), v.end(), [](const ordered_json& e) { return e.is_structured(); });
    out += flat ? "[" : "[\n";
    for (size_t i = 0; i < v.size(); ++i) {
      if (!flat) out += indent(depth + 1);
      emit(v[i], depth + 1, path + "/" + std::to_string(i), out);
      if (i + 1 < v.size()) out += flat ? ", " : ",\n";
    }
    if (!flat) {
      out += '\n';
      out += indent(depth);
    }
    out += ']';
  } else {
    if (v.is_number_float() && !std::isfinite(v.get<double>()))
      throw std::invalid_argument((path.empty() ? "/" : path) + ": " + json_excerpt(v) + " cannot be written as JSON");
    out += v.dump();  // escapes strings; shortest text that reads back as the same double
  }
}

}  // namespace

std::string format_json(const ordered_json& j) {
  std::string out;
  emit(j, 0, "", out);
  return out;
}

void write_json_atomic(const std::string& path, const ordered_json& j) {
  // Serialise first: a value that cannot be written must not cost the old file.
  std::string text;
  try {
    text = format_json(j) + "\n";
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not written, the data cannot be written as JSON: " + e.what());
  }
  write_file_atomic(path, text);
}

std::string json_excerpt(const ordered_json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();
    return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
  }
  std::string text = v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace memopt::solver

// io.cpp: the solver's border -- profile.json and schedule.json (docs/formats.md sections 2-3)
// read, checked and written. What passes here, the solver trusts.
#include "solver/io.h"

#include "solver/atomic_file.h"
#include "solver/read_file.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace memopt::solver {

using nlohmann::json;

namespace {

constexpr std::string_view kProfileFormat = "memopt.profile";
constexpr std::string_view kScheduleFormat = "memopt.schedule";
constexpr int64_t kVersion = 1;

// 2^63 as a double: the first double above every int64.
constexpr double kInt64Limit = 9223372036854775808.0;

std::string profile_fix(const std::string& source, const char* what = "the field") {
  return "fix " + std::string(what) + " or regenerate the file with `memopt profile ... --out " + source + "`";
}
std::string schedule_fix(const std::string& source) {
  return "regenerate it with `memopt solve --profile P.json --budget B --out " + source + "`";
}

// A value as the user wrote it, short enough for one line of an error.
std::string excerpt(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();
    return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
  }
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string (" + excerpt(v) + ")";
    case json::value_t::boolean: return "a boolean (" + excerpt(v) + ")";
    default: return "a number (" + excerpt(v) + ")";
  }
}

// Walks one parsed document. Every failure throws FormatError as
// "<source>: <json path>: <what is wrong>; <fix>".
class Reader {
 public:
  Reader(std::string source, std::string fix) : source_(std::move(source)), fix_(std::move(fix)) {}

  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    fail_with_fix(path, what, fix_);
  }
  [[noreturn]] void fail_with_fix(const std::string& path, const std::string& what, const std::string& fix) const {
    throw FormatError(source_ + ": " + path + ": " + what + "; " + fix);
  }
  // For messages that already start with their JSON path (validate()).
  [[noreturn]] void fail_raw(const std::string& path_and_what) const {
    throw FormatError(source_ + ": " + path_and_what + "; " + fix_);
  }

  void expect_object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, found " + describe(v));
  }
  void expect_array(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array, found " + describe(v));
  }

  // Absent and null both mean "not given" for optional fields: Python writes None as null.
  const json* optional(const json& object, const char* key) const {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const json& required(const json& object, const std::string& path, const char* key) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(path + "/" + key, "missing, but it is required");
    return *it;
  }

  // A whole number that fits int64. `kind` completes "sizes are integers in bytes".
  int64_t integer(const json& v, const std::string& path, const char* kind) const {
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(path, excerpt(v) + " is larger than the largest 64-bit integer (9223372036854775807)");
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      // Tools that write every number as a double (4e9, 25165824.0) are fine as long
      // as the value is whole; 1.5 bytes is a bug upstream, not something to round.
      const double d = v.get<double>();
      if (!std::isfinite(d)) fail(path, excerpt(v) + " is not a finite number");
      if (d != std::floor(d)) fail(path, excerpt(v) + " is not a whole number, but " + kind);
      if (d >= kInt64Limit || d < -kInt64Limit)
        fail(path, excerpt(v) + " is larger than the largest 64-bit integer (9223372036854775807)");
      return static_cast<int64_t>(d);
    }
    fail(path, std::string("expected a whole number (") + kind + "), found " + describe(v));
  }

  int64_t non_negative_bytes(const json& v, const std::string& path) const {
    const int64_t n = integer(v, path, "sizes are integers in bytes");
    if (n < 0) fail(path, std::to_string(n) + " is negative, but sizes are byte counts (>= 0)");
    return n;
  }

  double finite(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, found " + describe(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(path, excerpt(v) + " is not a finite number");
    return d;
  }

  double non_negative_ms(const json& v, const std::string& path) const {
    const double d = finite(v, path);
    if (d < 0) fail(path, excerpt(v) + " is negative, but times are durations in ms (>= 0)");
    return d;
  }

  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, found " + describe(v));
    return v.get<std::string>();
  }

  bool boolean(const json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "expected true or false, found " + describe(v));
    return v.get<bool>();
  }

  // `format` says what the file is and `version` which layout of it; both first, so
  // that a schedule passed as a profile gets that message, not a missing field.
  void check_header(const json& root, std::string_view format, std::string_view other_format,
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
    if (version != kVersion)
      fail("/version", std::to_string(version) + " is not a version this memopt reads (it reads " +
                           std::to_string(kVersion) + ")");
  }

 private:
  std::string source_;
  std::string fix_;
};

Stage read_stage(const Reader& r, const json& v, const std::string& path) {
  r.expect_object(v, path);
  Stage s;
  s.name = r.string(r.required(v, path, "name"), path + "/name");
  // Signs, saved >= out and the totals are checked by validate(), once for every Chain.
  s.fwd_ms = r.finite(r.required(v, path, "fwd_ms"), path + "/fwd_ms");
  s.bwd_ms = r.finite(r.required(v, path, "bwd_ms"), path + "/bwd_ms");
  const char* sizes = "sizes are integers in bytes";
  s.out_bytes = r.integer(r.required(v, path, "out_bytes"), path + "/out_bytes", sizes);
  s.saved_bytes = r.integer(r.required(v, path, "saved_bytes"), path + "/saved_bytes", sizes);
  s.fwd_tmp_bytes = r.integer(r.required(v, path, "fwd_tmp_bytes"), path + "/fwd_tmp_bytes", sizes);
  s.bwd_tmp_bytes = r.integer(r.required(v, path, "bwd_tmp_bytes"), path + "/bwd_tmp_bytes", sizes);
  if (v.contains("fwd_nograd_ms") && !v["fwd_nograd_ms"].is_null())
    s.fwd_nograd_ms = r.finite(v["fwd_nograd_ms"], path + "/fwd_nograd_ms");
  if (v.contains("fwd_keep_tmp_bytes") && !v["fwd_keep_tmp_bytes"].is_null())
    s.fwd_keep_tmp_bytes = r.integer(v["fwd_keep_tmp_bytes"], path + "/fwd_keep_tmp_bytes", sizes);
  if (v.contains("param_bytes") && !v["param_bytes"].is_null())
    s.param_bytes = r.non_negative_bytes(v["param_bytes"], path + "/param_bytes");
  if (v.contains("param_reads") && !v["param_reads"].is_null()) {
    const json& reads = v["param_reads"];
    r.expect_array(reads, path + "/param_reads");
    for (size_t k = 0; k < reads.size(); ++k) {
      const std::string at = path + "/param_reads/" + std::to_string(k);
      if (!reads[k].is_array() || reads[k].size() != 2)
        r.fail(at, "expected [home stage, bytes] as in [0, 524288]");
      s.param_reads.emplace_back(static_cast<int>(r.integer(reads[k][0], at + "/0", "stage indices are integers")),
                                 r.non_negative_bytes(reads[k][1], at + "/1"));
    }
  }
  return s;
}

Op read_op(const Reader& r, const json& v, const std::string& path, int chain_length) {
  const std::string shape = "an op is [\"word\", index] as in [\"fwd_keep\", 3], or [\"loss\"]";
  if (!v.is_array()) r.fail(path, "expected an array, found " + describe(v) + "; " + shape);
  if (v.empty() || v.size() > 2) r.fail(path, "has " + std::to_string(v.size()) + " elements, but " + shape);
  const std::string word = r.string(v[0], path + "/0");
  const auto kind = op_kind_from_word(word);
  if (!kind) {
    std::string words;
    for (const OpKindInfo& k : kOpKinds) words += (words.empty() ? "" : ", ") + std::string(k.word);
    r.fail(path + "/0", "\"" + word + "\" is not an op; the ops are " + words);
  }
  const OpKindInfo& k = info(*kind);
  if (!k.has_index) {
    if (v.size() != 1) r.fail(path, word + " takes no index: write [\"" + word + "\"]");
    return Op{*kind, -1};
  }
  if (v.size() != 2) r.fail(path, word + " needs an index, as in [\"" + word + "\", 3]");
  const std::string index_path = path + "/1";
  const int64_t index = r.integer(v[1], index_path, "op indices are integers");
  if (index < 0) r.fail(index_path, std::to_string(index) + " is negative, but indices count from 0");
  // fwd_*/bwd name a stage 0..L-1; offload/prefetch name an activation a_0..a_L
  // (and *_saved an ā_k, k >= 1: the simulator names a bad 0).
  const bool stage_index = k.is_compute;
  const int64_t last = stage_index ? chain_length - 1 : chain_length;
  if (index > last)
    r.fail(index_path, std::string(stage_index ? "stage " : "activation ") + std::to_string(index) +
                           " does not exist: /chain_length is " + std::to_string(chain_length) + ", so " + word +
                           " takes 0.." + std::to_string(last));
  return Op{*kind, static_cast<int>(index)};
}

// Our formats nest four levels deep. Deeper input is garbage or an attack, and
// nlohmann copies and prints values recursively, so a file of 100,000 nested
// brackets would overflow the stack later instead of failing here.
constexpr int kMaxDepth = 64;

json parse_text(std::string_view text, const std::string& path, const std::string& fix) {
  const json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth)
      throw FormatError(path + ": values nest deeper than " + std::to_string(kMaxDepth) +
                        " levels, far beyond any memopt file; " + fix);
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception& e) {
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
    throw FormatError(path + ": not valid JSON: " + what + "; " + fix);
  }
}

// Note [Key order in written files]: nlohmann::json keeps object keys sorted, which
// would put "bwd_ms" before "name" and "format" in the middle. Written files follow
// a fixed order instead (docs/formats.md section 2.9), so every file reads alike and diffs stay
// small; keys not listed here follow, alphabetically. "kind" precedes "name" for
// the device object; no other object has both.
constexpr std::string_view kKeyOrder[] = {
    "format", "version", "note", "solver", "model", "device", "measured", "input_bytes", "static_bytes", "link",
    "loss", "budget_bytes", "chain_length", "predicted", "stages", "ops",
    // inside stages, loss, link and predicted
    "kind", "name", "fwd_ms", "fwd_nograd_ms", "bwd_ms", "out_bytes", "saved_bytes", "fwd_tmp_bytes", "fwd_keep_tmp_bytes", "bwd_tmp_bytes",
    "param_bytes", "param_reads", "d2h_bytes_per_s", "h2d_bytes_per_s", "peak_bytes", "time_ms",
    // inside model
    "n_layer", "n_embd", "n_head", "vocab", "seq_len", "batch", "dtype"};

size_t key_rank(const std::string& key) {
  const auto it = std::find(std::begin(kKeyOrder), std::end(kKeyOrder), key);
  return static_cast<size_t>(it - std::begin(kKeyOrder));
}

void emit(const json& v, int depth, const std::string& path, std::string& out) {
  const std::string indent(2 * static_cast<size_t>(depth + 1), ' ');
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<const std::string*, const json*>> items;
    for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& a, const auto& b) { return key_rank(*a.first) < key_rank(*b.first); });
    out += "{\n";
    for (size_t i = 0; i < items.size(); ++i) {
      out += indent + json(*items[i].first).dump() + ": ";
      emit(*items[i].second, depth + 1, path + "/" + *items[i].first, out);
      out += i + 1 < items.size() ? ",\n" : "\n";
    }
    out += std::string(2 * static_cast<size_t>(depth), ' ') + "}";
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    // An array of scalars -- an op such as ["fwd_keep", 3] -- stays on one line, so a
    // schedule reads and diffs one op per line.
    const bool flat = std::none_of(v.begin(), v.end(), [](const json& e) { return e.is_structured(); });
    out += flat ? "[" : "[\n";
    for (size_t i = 0; i < v.size(); ++i) {
      if (!flat) out += indent;
      emit(v[i], depth + 1, path + "/" + std::to_string(i), out);
      if (i + 1 < v.size()) out += flat ? ", " : ",\n";
    }
    out += flat ? "]" : "\n" + std::string(2 * static_cast<size_t>(depth), ' ') + "]";
  } else {
    // nlohmann would write NaN and infinity as null, which no reader accepts back.
    if (v.is_number_float() && !std::isfinite(v.get<double>()))
      throw std::invalid_argument((path.empty() ? "/" : path) + ": " + excerpt(v) + " cannot be written as JSON");
    out += v.dump();  // escapes strings; shortest text that reads back as the same double
  }
}

}  // namespace

// ---- profiles ----

Profile profile_from_json(const json& j, const std::string& source) {
  const Reader r(source, profile_fix(source));
  r.check_header(j, kProfileFormat, kScheduleFormat, "memopt profile",
                 "pass the profile.json written by `memopt profile` here, not a schedule");
  Profile p;
  if (const json* v = r.optional(j, "model")) {
    r.expect_object(*v, "/model");
    p.model = *v;
  }
  if (const json* v = r.optional(j, "device")) {
    r.expect_object(*v, "/device");
    p.device = *v;
  }
  if (const json* v = r.optional(j, "measured")) p.measured = r.boolean(*v, "/measured");
  Chain& c = p.chain;
  c.input_bytes = r.integer(r.required(j, "", "input_bytes"), "/input_bytes", "sizes are integers in bytes");
  if (const json* v = r.optional(j, "static_bytes")) p.static_bytes = r.non_negative_bytes(*v, "/static_bytes");
  if (const json* v = r.optional(j, "link")) {
    r.expect_object(*v, "/link");
    Link link;
    link.d2h_bytes_per_s = r.finite(r.required(*v, "/link", "d2h_bytes_per_s"), "/link/d2h_bytes_per_s");
    link.h2d_bytes_per_s = r.finite(r.required(*v, "/link", "h2d_bytes_per_s"), "/link/h2d_bytes_per_s");
    c.link = link;
  }
  if (const json* v = r.optional(j, "loss")) {
    r.expect_object(*v, "/loss");
    c.loss.bwd_ms = r.finite(r.required(*v, "/loss", "bwd_ms"), "/loss/bwd_ms");
    c.loss.bwd_tmp_bytes = r.integer(r.required(*v, "/loss", "bwd_tmp_bytes"), "/loss/bwd_tmp_bytes",
                                     "sizes are integers in bytes");
  }
  const json& stages = r.required(j, "", "stages");
  r.expect_array(stages, "/stages");
  // A chain longer than an int can index is not a model; it would also not fit in memory.
  if (stages.size() > static_cast<size_t>(INT_MAX))
    r.fail("/stages", "has " + std::to_string(stages.size()) + " stages, more than " + std::to_string(INT_MAX));
  c.stages.reserve(stages.size());
  for (size_t i = 0; i < stages.size(); ++i)
    c.stages.push_back(read_stage(r, stages[i], "/stages/" + std::to_string(i)));
  if (std::string e = validate(c); !e.empty()) r.fail_raw(e);
  return p;
}

json profile_to_json(const Profile& p) {
  const Chain& c = p.chain;
  json j = {{"format", kProfileFormat},
            {"version", kVersion},
            {"model", p.model},
            {"device", p.device},
            {"measured", p.measured},
            {"input_bytes", c.input_bytes},
            {"static_bytes", p.static_bytes},
            {"loss", {{"bwd_ms", c.loss.bwd_ms}, {"bwd_tmp_bytes", c.loss.bwd_tmp_bytes}}}};
  if (c.link)
    j["link"] = {{"d2h_bytes_per_s", c.link->d2h_bytes_per_s}, {"h2d_bytes_per_s", c.link->h2d_bytes_per_s}};
  json stages = json::array();
  for (const Stage& s : c.stages) {
    json stage = {{"name", s.name},
                  {"fwd_ms", s.fwd_ms},
                  {"bwd_ms", s.bwd_ms},
                  {"out_bytes", s.out_bytes},
                  {"saved_bytes", s.saved_bytes},
                  {"fwd_tmp_bytes", s.fwd_tmp_bytes},
                  {"bwd_tmp_bytes", s.bwd_tmp_bytes}};
    if (s.fwd_keep_tmp_bytes) stage["fwd_keep_tmp_bytes"] = *s.fwd_keep_tmp_bytes;
    if (s.fwd_nograd_ms) stage["fwd_nograd_ms"] = *s.fwd_nograd_ms;
    if (s.param_bytes) stage["param_bytes"] = *s.param_bytes;
    if (!s.param_reads.empty()) {
      json reads = json::array();
      for (const auto& [home, bytes] : s.param_reads) reads.push_back({home, bytes});
      stage["param_reads"] = std::move(reads);
    }
    stages.push_back(std::move(stage));
  }
  j["stages"] = std::move(stages);
  return j;
}

// ---- schedules ----

Schedule schedule_from_json(const json& j, const std::string& source) {
  const Reader r(source, schedule_fix(source));
  r.check_header(j, kScheduleFormat, kProfileFormat, "memopt schedule",
                 "pass the schedule.json written by `memopt solve` here, not a profile");
  Schedule s;
  if (const json* v = r.optional(j, "solver")) s.solver = r.string(*v, "/solver");
  s.budget_bytes = r.integer(r.required(j, "", "budget_bytes"), "/budget_bytes", "budgets are integers in bytes");
  if (s.budget_bytes <= 0)
    r.fail("/budget_bytes", std::to_string(s.budget_bytes) + " is not a positive budget in bytes");
  const int64_t length = r.integer(r.required(j, "", "chain_length"), "/chain_length", "it counts stages");
  if (length < 1 || length > INT_MAX)
    r.fail("/chain_length", std::to_string(length) + " is not a number of stages (1 to " + std::to_string(INT_MAX) +
                                ")");
  s.chain_length = static_cast<int>(length);
  // `predicted` is optional so that a hand-written schedule can be checked with
  // `memopt simulate`, which recomputes it anyway.
  if (const json* v = r.optional(j, "predicted")) {
    r.expect_object(*v, "/predicted");
    s.predicted.peak_bytes = r.non_negative_bytes(r.required(*v, "/predicted", "peak_bytes"), "/predicted/peak_bytes");
    s.predicted.time_ms = r.non_negative_ms(r.required(*v, "/predicted", "time_ms"), "/predicted/time_ms");
  }
  const json& ops = r.required(j, "", "ops");
  r.expect_array(ops, "/ops");
  s.ops.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    s.ops.push_back(read_op(r, ops[i], "/ops/" + std::to_string(i), s.chain_length));
  return s;
}

json schedule_to_json(const Schedule& s) {
  json ops = json::array();
  for (const Op& op : s.ops) {
    const OpKindInfo& k = info(op.kind);
    ops.push_back(k.has_index ? json::array({k.word, op.index}) : json::array({k.word}));
  }
  return {{"format", kScheduleFormat},
          {"version", kVersion},
          {"solver", s.solver},
          {"budget_bytes", s.budget_bytes},
          {"chain_length", s.chain_length},
          {"predicted", {{"peak_bytes", s.predicted.peak_bytes}, {"time_ms", s.predicted.time_ms}}},
          {"ops", std::move(ops)}};
}

// ---- files ----

Profile parse_profile(std::string_view text, const std::string& source) {
  return profile_from_json(parse_text(text, source, profile_fix(source, "the syntax")), source);
}

Schedule parse_schedule(std::string_view text, const std::string& source) {
  return schedule_from_json(parse_text(text, source, schedule_fix(source)), source);
}

Profile read_profile(const std::string& path) {
  return parse_profile(
      read_file_text(path, "check the path, or write a profile with `memopt profile ... --out " + path + "`"), path);
}

Schedule read_schedule(const std::string& path) {
  return parse_schedule(
      read_file_text(
          path, "check the path, or write a schedule with `memopt solve --profile P.json --budget B --out " + path + "`"),
      path);
}

std::string format_json(const json& j) {
  std::string out;
  emit(j, 0, "", out);
  return out;
}

void write_json_atomic(const std::string& path, const json& j) {
  // Serialise first: a value that cannot be written must not cost the old file.
  std::string text;
  try {
    text = format_json(j) + "\n";
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not written, the data cannot be written as JSON: " + e.what());
  }
  write_file_atomic(path, text);
}

}  // namespace memopt::solver

// schedule_json.cpp: schedule.json read field by field (json_reader.h) and written in
// the documented key order, one op per line.
#include "solver/io/schedule_json.h"

#include <climits>

#include "solver/io/json_reader.h"
#include "solver/io/read_file.h"

namespace memopt::solver {

using nlohmann::ordered_json;

namespace {

std::string schedule_fix(const std::string& source) {
  return "regenerate it with `memopt solve --profile P.json --budget B --out " + source + "`";
}

Op read_op(const JsonReader& r, const ordered_json& v, const std::string& path, int chain_length) {
  const std::string shape = "an op is [\"word\", index] as in [\"fwd_keep\", 3], or [\"loss\"]";
  if (!v.is_array()) r.fail(path, "expected an array, found " + describe_json(v) + "; " + shape);
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

}  // namespace

Schedule schedule_from_json(const ordered_json& j, const std::string& source) {
  const JsonReader r(source, schedule_fix(source));
  r.check_header(j, kScheduleFormat, kProfileFormat, "memopt schedule",
                 "pass the schedule.json written by `memopt solve` here, not a profile");
  Schedule s;
  if (const ordered_json* v = r.optional(j, "solver")) s.solver = r.string(*v, "/solver");
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
  if (const ordered_json* v = r.optional(j, "predicted")) {
    r.expect_object(*v, "/predicted");
    s.predicted.peak_bytes = r.non_negative_bytes(r.required(*v, "/predicted", "peak_bytes"), "/predicted/peak_bytes");
    s.predicted.time_ms = r.non_negative_ms(r.required(*v, "/predicted", "time_ms"), "/predicted/time_ms");
  }
  if (const ordered_json* v = r.optional(j, "profiled_on")) {
    r.expect_object(*v, "/profiled_on");
    if (const ordered_json* d = r.optional(*v, "device")) s.profiled_on.device = r.string(*d, "/profiled_on/device");
    if (const ordered_json* d = r.optional(*v, "dtype")) s.profiled_on.dtype = r.string(*d, "/profiled_on/dtype");
  }
  const ordered_json& ops = r.required(j, "", "ops");
  r.expect_array(ops, "/ops");
  s.ops.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    s.ops.push_back(read_op(r, ops[i], "/ops/" + std::to_string(i), s.chain_length));
  return s;
}

ordered_json schedule_to_json(const Schedule& s) {
  ordered_json ops = ordered_json::array();
  for (const Op& op : s.ops) {
    const OpKindInfo& k = info(op.kind);
    ops.push_back(k.has_index ? ordered_json::array({k.word, op.index}) : ordered_json::array({k.word}));
  }
  ordered_json j;
  j["format"] = kScheduleFormat;
  j["version"] = kFormatVersion;
  j["solver"] = s.solver;
  j["budget_bytes"] = s.budget_bytes;
  j["chain_length"] = s.chain_length;
  j["predicted"] = {{"peak_bytes", s.predicted.peak_bytes}, {"time_ms", s.predicted.time_ms}};
  if (!s.profiled_on.device.empty() || !s.profiled_on.dtype.empty())
    j["profiled_on"] = {{"device", s.profiled_on.device}, {"dtype", s.profiled_on.dtype}};
  j["ops"] = std::move(ops);
  return j;
}

Schedule parse_schedule(std::string_view text, const std::string& source) {
  return schedule_from_json(parse_json_text(text, source, schedule_fix(source)), source);
}

Schedule read_schedule(const std::string& path) {
  return parse_schedule(
      read_file_text(
          path, "check the path, or write a schedule with `memopt solve --profile P.json --budget B --out " + path + "`"),
      path);
}

}  // namespace memopt::solver

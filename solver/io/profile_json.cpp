// profile_json.cpp: profile.json read field by field (json_reader.h) and written in
// the documented key order.
#include "solver/io/profile_json.h"

#include <climits>

#include "solver/io/json_reader.h"
#include "solver/io/read_file.h"

namespace memopt::solver {

using nlohmann::ordered_json;

namespace {

std::string profile_fix(const std::string& source, const char* what = "the field") {
  return "fix " + std::string(what) + " or regenerate the file with `memopt profile ... --out " + source + "`";
}

Stage read_stage(const JsonReader& r, const ordered_json& v, const std::string& path) {
  r.expect_object(v, path);
  Stage s;
  s.name = r.string(r.required(v, path, "name"), path + "/name");
  if (const ordered_json* f = r.optional(v, "block")) s.block = r.string(*f, path + "/block");
  // Signs, saved >= out and the totals are checked by validate(), once for every Chain.
  s.fwd_ms = r.finite(r.required(v, path, "fwd_ms"), path + "/fwd_ms");
  s.bwd_ms = r.finite(r.required(v, path, "bwd_ms"), path + "/bwd_ms");
  const char* sizes = "sizes are integers in bytes";
  s.out_bytes = r.integer(r.required(v, path, "out_bytes"), path + "/out_bytes", sizes);
  s.saved_bytes = r.integer(r.required(v, path, "saved_bytes"), path + "/saved_bytes", sizes);
  s.fwd_tmp_bytes = r.integer(r.required(v, path, "fwd_tmp_bytes"), path + "/fwd_tmp_bytes", sizes);
  s.bwd_tmp_bytes = r.integer(r.required(v, path, "bwd_tmp_bytes"), path + "/bwd_tmp_bytes", sizes);
  if (const ordered_json* f = r.optional(v, "fwd_nograd_ms")) s.fwd_nograd_ms = r.finite(*f, path + "/fwd_nograd_ms");
  if (const ordered_json* f = r.optional(v, "fwd_bwd_pair_ms")) s.fwd_bwd_pair_ms = r.finite(*f, path + "/fwd_bwd_pair_ms");
  if (const ordered_json* f = r.optional(v, "fwd_keep_tmp_bytes"))
    s.fwd_keep_tmp_bytes = r.integer(*f, path + "/fwd_keep_tmp_bytes", sizes);
  if (const ordered_json* f = r.optional(v, "carried_bytes"))
    s.carried_bytes = r.integer(*f, path + "/carried_bytes", sizes);
  if (const ordered_json* f = r.optional(v, "role")) {
    const std::string word = r.string(*f, path + "/role");
    const std::optional<StageRole> role = role_from_word(word);
    if (!role) r.fail(path + "/role", "'" + word + "' is not a stage role; use attention_core, pointwise or other");
    s.role = *role;
  }
  if (const ordered_json* f = r.optional(v, "param_bytes"))
    s.param_bytes = r.non_negative_bytes(*f, path + "/param_bytes");
  if (const ordered_json* reads = r.optional(v, "param_reads")) {
    r.expect_array(*reads, path + "/param_reads");
    for (size_t k = 0; k < reads->size(); ++k) {
      const ordered_json& read = (*reads)[k];
      const std::string at = path + "/param_reads/" + std::to_string(k);
      if (!read.is_array() || read.size() != 2) r.fail(at, "expected [home stage, bytes] as in [0, 524288]");
      s.param_reads.emplace_back(static_cast<int>(r.integer(read[0], at + "/0", "stage indices are integers")),
                                 r.non_negative_bytes(read[1], at + "/1"));
    }
  }
  return s;
}

ordered_json stage_to_json(const Stage& s) {
  ordered_json stage;
  stage["name"] = s.name;
  if (!s.block.empty()) stage["block"] = s.block;
  stage["fwd_ms"] = s.fwd_ms;
  if (s.fwd_nograd_ms) stage["fwd_nograd_ms"] = *s.fwd_nograd_ms;
  stage["bwd_ms"] = s.bwd_ms;
  if (s.fwd_bwd_pair_ms) stage["fwd_bwd_pair_ms"] = *s.fwd_bwd_pair_ms;
  stage["out_bytes"] = s.out_bytes;
  stage["saved_bytes"] = s.saved_bytes;
  stage["fwd_tmp_bytes"] = s.fwd_tmp_bytes;
  if (s.fwd_keep_tmp_bytes) stage["fwd_keep_tmp_bytes"] = *s.fwd_keep_tmp_bytes;
  stage["bwd_tmp_bytes"] = s.bwd_tmp_bytes;
  if (s.carried_bytes > 0) stage["carried_bytes"] = s.carried_bytes;
  if (s.role != StageRole::Other) stage["role"] = role_word(s.role);
  if (s.param_bytes) stage["param_bytes"] = *s.param_bytes;
  if (!s.param_reads.empty()) {
    ordered_json reads = ordered_json::array();
    for (const auto& [home, bytes] : s.param_reads) reads.push_back({home, bytes});
    stage["param_reads"] = std::move(reads);
  }
  return stage;
}

}  // namespace

ProfiledOn profiled_on(const Profile& p) {
  std::string device = p.device.is_object() ? p.device.value("kind", std::string()) : std::string();
  if (!p.measured && p.device.is_object()) device = "modeled " + p.device.value("name", device);
  const std::string dtype = p.model.is_object() ? p.model.value("dtype", std::string("float32")) : "float32";
  return {device, dtype};
}

Profile profile_from_json(const ordered_json& j, const std::string& source) {
  const JsonReader r(source, profile_fix(source));
  r.check_header(j, kProfileFormat, kScheduleFormat, "memopt profile",
                 "pass the profile.json written by `memopt profile` here, not a schedule");
  Profile p;
  if (const ordered_json* v = r.optional(j, "model")) {
    r.expect_object(*v, "/model");
    p.model = *v;
  }
  if (const ordered_json* v = r.optional(j, "device")) {
    r.expect_object(*v, "/device");
    p.device = *v;
  }
  if (const ordered_json* v = r.optional(j, "measured")) p.measured = r.boolean(*v, "/measured");
  Chain& c = p.chain;
  c.input_bytes = r.integer(r.required(j, "", "input_bytes"), "/input_bytes", "sizes are integers in bytes");
  if (const ordered_json* v = r.optional(j, "static_bytes")) p.static_bytes = r.non_negative_bytes(*v, "/static_bytes");
  if (const ordered_json* v = r.optional(j, "link")) {
    r.expect_object(*v, "/link");
    Link link;
    link.d2h_bytes_per_s = r.finite(r.required(*v, "/link", "d2h_bytes_per_s"), "/link/d2h_bytes_per_s");
    link.h2d_bytes_per_s = r.finite(r.required(*v, "/link", "h2d_bytes_per_s"), "/link/h2d_bytes_per_s");
    c.link = link;
  }
  if (const ordered_json* v = r.optional(j, "loss")) {
    r.expect_object(*v, "/loss");
    c.loss.bwd_ms = r.finite(r.required(*v, "/loss", "bwd_ms"), "/loss/bwd_ms");
    c.loss.bwd_tmp_bytes = r.integer(r.required(*v, "/loss", "bwd_tmp_bytes"), "/loss/bwd_tmp_bytes",
                                     "sizes are integers in bytes");
  }
  const ordered_json& stages = r.required(j, "", "stages");
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

ordered_json profile_to_json(const Profile& p) {
  const Chain& c = p.chain;
  ordered_json j;
  j["format"] = kProfileFormat;
  j["version"] = kFormatVersion;
  j["model"] = p.model;
  j["device"] = p.device;
  j["measured"] = p.measured;
  j["input_bytes"] = c.input_bytes;
  j["static_bytes"] = p.static_bytes;
  if (c.link) j["link"] = {{"d2h_bytes_per_s", c.link->d2h_bytes_per_s}, {"h2d_bytes_per_s", c.link->h2d_bytes_per_s}};
  j["loss"] = {{"bwd_ms", c.loss.bwd_ms}, {"bwd_tmp_bytes", c.loss.bwd_tmp_bytes}};
  ordered_json stages = ordered_json::array();
  for (const Stage& s : c.stages) stages.push_back(stage_to_json(s));
  j["stages"] = std::move(stages);
  return j;
}

Profile parse_profile(std::string_view text, const std::string& source) {
  return profile_from_json(parse_json_text(text, source, profile_fix(source, "the syntax")), source);
}

Profile read_profile(const std::string& path) {
  return parse_profile(
      read_file_text(path, "check the path, or write a profile with `memopt profile ... --out " + path + "`"), path);
}

}  // namespace memopt::solver

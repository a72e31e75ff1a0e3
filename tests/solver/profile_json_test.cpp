// profile_json_test.cpp: profile.json read and written -- round trips, the documented
// layout, defaults, one test per class of bad input (each error must name the file,
// the JSON path and the fix), files on disk, and the bundled example profile.
//   ctest --test-dir build -R 'Profile|Example'
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "solver/io/schedule_json.h"
#include "tests/solver/contains.h"
#include "tests/solver/json_samples.h"
#include "tests/solver/temp_dir.h"

namespace memopt::solver {
namespace {

using json = nlohmann::ordered_json;
using testing::Contains;
using testing::ExpectSameProfile;
using testing::sample_profile;
using testing::sample_schedule;
namespace fs = std::filesystem;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
const std::string kProfileSource = "bad.profile.json";
const std::string kProfileFix = "regenerate the file with `memopt profile ... --out bad.profile.json`";

json valid_profile() { return profile_to_json(sample_profile(true)); }

::testing::AssertionResult ProfileRejected(const json& j, const std::string& path, const std::string& what,
                                           const std::string& fix = kProfileFix) {
  return testing::Rejected(profile_from_json, kProfileSource, j, path, what, fix);
}

class ProfileFile : public testing::TempDir {};

// ---- round trips ----

TEST(ProfileJson, RoundTripWithLink) {
  const Profile p = sample_profile(true);
  ExpectSameProfile(profile_from_json(profile_to_json(p), "mem"), p);
  // Through the text the files hold.
  const json reparsed = json::parse(format_json(profile_to_json(p)));
  EXPECT_EQ(reparsed, profile_to_json(p));
  ExpectSameProfile(profile_from_json(reparsed, "mem"), p);
}

TEST(ProfileJson, RoundTripWithoutLink) {
  Profile p = sample_profile(false);
  p.measured = true;
  const json j = profile_to_json(p);
  EXPECT_FALSE(j.contains("link"));
  const Profile back = profile_from_json(json::parse(format_json(j)), "mem");
  EXPECT_FALSE(back.chain.link.has_value());
  ExpectSameProfile(back, p);
}

TEST(ProfileJson, WriterFollowsSpecLayout) {
  const std::string text = format_json(valid_profile());
  EXPECT_TRUE(text.starts_with("{\n  \"format\": \"memopt.profile\",\n  \"version\": 1,\n")) << text;
  // Keys in the order of docs/formats.md, "How memopt writes its JSON files", top level and within a stage.
  const char* order[] = {"\"model\"", "\"device\"", "\"measured\"", "\"input_bytes\"", "\"static_bytes\"",
                         "\"link\"",  "\"loss\"",   "\"stages\"",   "\"fwd_ms\"",      "\"bwd_ms\"",
                         "\"out_bytes\"", "\"saved_bytes\"", "\"fwd_tmp_bytes\"", "\"bwd_tmp_bytes\""};
  size_t at = 0;
  for (const char* key : order) {
    const size_t next = text.find(key, at);
    ASSERT_NE(next, std::string::npos) << key << " missing or out of order in\n" << text;
    at = next;
  }
  EXPECT_TRUE(Contains(text, "\"device\": {\n    \"kind\": \"cpu\",\n    \"name\": \"test cpu\","));
  EXPECT_TRUE(Contains(text, "      \"name\": \"embed\",\n      \"fwd_ms\": 0.1,\n"));
}

TEST(ProfileJson, WrittenTextIsTheDocumentedLayout) {
  Profile p;
  p.model = {{"name", "toy"}, {"n_layer", 1}};
  p.device = {{"kind", "cpu"}, {"name", "c"}};
  p.chain.input_bytes = 8;
  p.chain.link = Link{1e9, 2e9};
  p.chain.loss = {0.5, 0};
  Stage s{"s", 1.5, 3.0, 16, 32, 8, 2, std::optional<int64_t>(4), std::optional<double>(1.25)};
  s.fwd_bwd_pair_ms = 4.25;
  s.param_bytes = 64;
  s.param_reads = {{0, 64}};
  p.chain.stages = {s, Stage{"t", 1.0, 2.0, 16, 16, 0, 0}};
  // docs/formats.md, "How memopt writes its JSON files": optional stage fields sit next to the
  // ones they refine.
  EXPECT_EQ(format_json(profile_to_json(p)), R"({
  "format": "memopt.profile",
  "version": 1,
  "model": {
    "name": "toy",
    "n_layer": 1
  },
  "device": {
    "kind": "cpu",
    "name": "c"
  },
  "measured": true,
  "input_bytes": 8,
  "static_bytes": 0,
  "link": {
    "d2h_bytes_per_s": 1000000000.0,
    "h2d_bytes_per_s": 2000000000.0
  },
  "loss": {
    "bwd_ms": 0.5,
    "bwd_tmp_bytes": 0
  },
  "stages": [
    {
      "name": "s",
      "fwd_ms": 1.5,
      "fwd_nograd_ms": 1.25,
      "bwd_ms": 3.0,
      "fwd_bwd_pair_ms": 4.25,
      "out_bytes": 16,
      "saved_bytes": 32,
      "fwd_tmp_bytes": 8,
      "fwd_keep_tmp_bytes": 4,
      "bwd_tmp_bytes": 2,
      "param_bytes": 64,
      "param_reads": [
        [0, 64]
      ]
    },
    {
      "name": "t",
      "fwd_ms": 1.0,
      "bwd_ms": 2.0,
      "out_bytes": 16,
      "saved_bytes": 16,
      "fwd_tmp_bytes": 0,
      "bwd_tmp_bytes": 0
    }
  ]
})");
}

TEST(ProfileJson, ModelAndDeviceKeepTheKeyOrderOfTheFile) {
  // Not alphabetical, and not any order the solver knows: the model's owner chose it.
  const std::string text = R"({"format": "memopt.profile", "version": 1,
    "model": {"vocab": 8, "name": "toy", "dropout": {"resid": 0.1, "attn": 0.0}},
    "device": {"threads": 2, "kind": "cpu"},
    "input_bytes": 8,
    "stages": [{"name": "s", "fwd_ms": 1, "bwd_ms": 2, "out_bytes": 8, "saved_bytes": 8,
                "fwd_tmp_bytes": 0, "bwd_tmp_bytes": 0}]})";
  const std::string written = format_json(profile_to_json(parse_profile(text, "p.json")));
  EXPECT_TRUE(Contains(written, R"("model": {
    "vocab": 8,
    "name": "toy",
    "dropout": {
      "resid": 0.1,
      "attn": 0.0
    }
  },
  "device": {
    "threads": 2,
    "kind": "cpu"
  },
)"));
}

TEST(ProfileJson, OptionalFieldsTakeTheirDefaults) {
  const json j = {{"format", "memopt.profile"},
                  {"version", 1},
                  {"input_bytes", 16},
                  {"stages", {{{"name", "s"}, {"fwd_ms", 1}, {"bwd_ms", 2}, {"out_bytes", 8},
                               {"saved_bytes", 8}, {"fwd_tmp_bytes", 0}, {"bwd_tmp_bytes", 0}}}}};
  const Profile p = profile_from_json(j, "min.json");
  EXPECT_EQ(p.model, json::object());
  EXPECT_EQ(p.device, json::object());
  EXPECT_TRUE(p.measured);
  EXPECT_EQ(p.static_bytes, 0);
  EXPECT_FALSE(p.chain.link.has_value());
  EXPECT_EQ(p.chain.loss.bwd_ms, 0.0);
  EXPECT_EQ(p.chain.loss.bwd_tmp_bytes, 0);
  // null means "not given" for optional fields (Python's None).
  json with_nulls = j;
  for (const char* key : {"model", "device", "measured", "static_bytes", "link", "loss"}) with_nulls[key] = nullptr;
  EXPECT_FALSE(profile_from_json(with_nulls, "nulls.json").chain.link.has_value());
}

TEST(ProfileJson, ExtraFieldsAreIgnored) {
  json j = valid_profile();
  j["note"] = "modeled";
  j["producer"] = {{"git", "abc"}};
  j["stages"][0]["flops"] = 1e9;
  j["link"]["pinned"] = true;
  j["loss"]["fwd_ms"] = 3;
  ExpectSameProfile(profile_from_json(j, "extra.json"), sample_profile(true));
}

TEST(ProfileJson, SizesWrittenAsWholeDoublesAreAccepted) {
  json j = valid_profile();
  j["stages"][0]["out_bytes"] = 1000.0;
  j["stages"][0]["saved_bytes"] = 4e9;
  const Profile p = profile_from_json(j, "floats.json");
  EXPECT_EQ(p.chain.stages[0].out_bytes, 1000);
  EXPECT_EQ(p.chain.stages[0].saved_bytes, 4000000000);
}

// memopt's extension (Note [Two forward temporaries]): optional, round-trips,
// validated like every size, and absent means "the same as fwd_tmp_bytes".
TEST(ProfileJson, KeepTmpIsOptionalAndDefaultsToFwdTmp) {
  Profile p;
  p.chain.input_bytes = 8;
  p.chain.stages.push_back({"a", 1.0, 2.0, 16, 32, 100, 7, std::optional<int64_t>(40)});
  p.chain.stages.push_back({"b", 1.0, 2.0, 16, 32, 100, 7, std::nullopt});
  const Profile back = profile_from_json(profile_to_json(p), "p.json");
  EXPECT_EQ(back.chain.stages[0].fwd_keep_tmp_bytes, std::optional<int64_t>(40));
  EXPECT_FALSE(back.chain.stages[1].fwd_keep_tmp_bytes.has_value());
  EXPECT_EQ(back.chain.ftmp_keep(0), 40);
  EXPECT_EQ(back.chain.ftmp_keep(1), 100);
  EXPECT_EQ(back.chain.ftmp(0), 100);
  auto j = profile_to_json(p);
  j["stages"][0]["fwd_keep_tmp_bytes"] = -1;
  try {
    profile_from_json(j, "p.json");
    FAIL() << "accepted a negative fwd_keep_tmp_bytes";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("/stages/0/fwd_keep_tmp_bytes"), std::string::npos) << e.what();
  }
}

// Note [Carried bytes]: optional, written only when positive, round-trips, and no
// more than the stage's input or output.
TEST(ProfileJson, CarriedBytesRoundTripAndAreBoundedByInputAndOutput) {
  Profile p;
  p.chain.input_bytes = 8;
  p.chain.stages.push_back({"a", 1.0, 2.0, 16, 32, 100, 7});
  p.chain.stages.push_back({"b", 1.0, 2.0, 24, 32, 100, 7});
  p.chain.stages[1].carried_bytes = 16;
  const auto j = profile_to_json(p);
  EXPECT_FALSE(j["stages"][0].contains("carried_bytes"));
  EXPECT_EQ(j["stages"][1]["carried_bytes"], 16);
  const Profile back = profile_from_json(j, "p.json");
  EXPECT_EQ(back.chain.carried(1), 0);
  EXPECT_EQ(back.chain.carried(2), 16);
  EXPECT_EQ(back.chain.shared(1, 2), 16);
  EXPECT_EQ(back.chain.shared(0, 2), 0);
  EXPECT_TRUE(back.chain.carries());
  for (const int64_t bad : {int64_t{17}, int64_t{-1}}) {
    auto broken = j;
    broken["stages"][1]["carried_bytes"] = bad;
    try {
      profile_from_json(broken, "p.json");
      FAIL() << "accepted carried_bytes " << bad;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("/stages/1/carried_bytes"), std::string::npos) << e.what();
    }
  }
}

// Note [Block boundaries] in coarsen.h: a stage's block is written right after its name,
// only when it has one, and read back; a stage without one reads as none.
TEST(ProfileJson, BlockFieldRoundTripsRightAfterTheName) {
  Profile p;
  p.chain.input_bytes = 8;
  p.chain.stages.push_back({"embed", 1.0, 2.0, 16, 32, 0, 0});
  p.chain.stages.push_back({"h.0.attn", 1.0, 2.0, 16, 32, 0, 0});
  p.chain.stages.push_back({"h.0.mlp", 1.0, 2.0, 16, 32, 0, 0});
  p.chain.stages[1].block = p.chain.stages[2].block = "h.0";
  const std::string text = format_json(profile_to_json(p));
  EXPECT_TRUE(Contains(text, "\"name\": \"h.0.attn\",\n      \"block\": \"h.0\",\n      \"fwd_ms\"")) << text;
  EXPECT_FALSE(Contains(text, "\"name\": \"embed\",\n      \"block\"")) << text;
  const Profile back = profile_from_json(profile_to_json(p), "p.json");
  EXPECT_EQ(back.chain.stages[0].block, "");
  EXPECT_EQ(back.chain.stages[1].block, "h.0");
  EXPECT_EQ(back.chain.stages[2].block, "h.0");
  auto broken = profile_to_json(p);
  broken["stages"][1]["block"] = 3;
  try {
    profile_from_json(broken, "p.json");
    FAIL() << "accepted a numeric block";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("/stages/1/block"), std::string::npos) << e.what();
  }
}

// ---- one test per class of bad input ----

TEST(ProfileErrors, NotAnObject) {
  EXPECT_TRUE(ProfileRejected(json::array(), "/", "expected an object, found an array"));
  EXPECT_TRUE(ProfileRejected("profile", "/", "found a string (\"profile\")"));
}

TEST(ProfileErrors, WrongOrMissingFormat) {
  json j = valid_profile();
  j.erase("format");
  EXPECT_TRUE(ProfileRejected(j, "/format", "missing, so this is not a memopt profile"));
  j["format"] = "memopt.profil";
  EXPECT_TRUE(ProfileRejected(j, "/format", "\"memopt.profil\" is not \"memopt.profile\""));
  j["format"] = 1;
  EXPECT_TRUE(ProfileRejected(j, "/format", "expected a string, found a number (1)"));
  // A schedule where a profile belongs says so rather than listing missing fields.
  EXPECT_TRUE(ProfileRejected(schedule_to_json(sample_schedule()), "/format", "this file is not a memopt profile",
                              "pass the profile.json written by `memopt profile`"));
}

TEST(ProfileErrors, WrongOrMissingVersion) {
  json j = valid_profile();
  j["version"] = 2;
  EXPECT_TRUE(ProfileRejected(j, "/version", "2 is not a version this memopt reads (it reads 1)"));
  j["version"] = "1";
  EXPECT_TRUE(ProfileRejected(j, "/version", "expected a whole number (versions are integers), found a string"));
  j.erase("version");
  EXPECT_TRUE(ProfileRejected(j, "/version", "missing, but it is required"));
}

TEST(ProfileErrors, MissingRequiredFields) {
  const std::pair<json::json_pointer, std::string> cases[] = {
      {json::json_pointer("/input_bytes"), "/input_bytes"},
      {json::json_pointer("/stages"), "/stages"},
      {json::json_pointer("/stages/1/saved_bytes"), "/stages/1/saved_bytes"},
      {json::json_pointer("/stages/0/name"), "/stages/0/name"},
      {json::json_pointer("/stages/2/bwd_tmp_bytes"), "/stages/2/bwd_tmp_bytes"},
      {json::json_pointer("/link/h2d_bytes_per_s"), "/link/h2d_bytes_per_s"},
      {json::json_pointer("/loss/bwd_ms"), "/loss/bwd_ms"},
  };
  for (const auto& [pointer, path] : cases) {
    SCOPED_TRACE(path);
    json j = valid_profile();
    j[pointer.parent_pointer()].erase(pointer.back());
    EXPECT_TRUE(ProfileRejected(j, path, "missing, but it is required"));
  }
}

TEST(ProfileErrors, WrongTypes) {
  struct Case {
    const char* pointer;
    json value;
    const char* what;
  };
  const Case cases[] = {
      {"/stages/0/fwd_ms", "1.0", "expected a number, found a string (\"1.0\")"},
      {"/stages/1/out_bytes", true, "expected a whole number (sizes are integers in bytes), found a boolean"},
      {"/stages/0/name", 3, "expected a string, found a number (3)"},
      {"/stages", json::object(), "expected an array, found an object"},
      {"/stages/1", 5, "expected an object, found a number (5)"},
      {"/model", "gpt2", "expected an object, found a string"},
      {"/device", json::array(), "expected an object, found an array"},
      {"/measured", "yes", "expected true or false, found a string"},
      {"/link", json::array({1, 2}), "expected an object, found an array"},
      {"/loss", 0, "expected an object, found a number"},
      {"/input_bytes", nullptr, "found null"},
      {"/stages/2/bwd_ms", nullptr, "expected a number, found null"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.pointer);
    json j = valid_profile();
    j[json::json_pointer(k.pointer)] = k.value;
    EXPECT_TRUE(ProfileRejected(j, k.pointer, k.what));
  }
}

TEST(ProfileErrors, FractionalBytes) {
  json j = valid_profile();
  j["stages"][1]["out_bytes"] = 1.5;
  EXPECT_TRUE(ProfileRejected(j, "/stages/1/out_bytes", "1.5 is not a whole number, but sizes are integers in bytes"));
  j = valid_profile();
  j["static_bytes"] = 0.25;
  EXPECT_TRUE(ProfileRejected(j, "/static_bytes", "0.25 is not a whole number"));
}

TEST(ProfileErrors, NegativeBytes) {
  json j = valid_profile();
  j["stages"][2]["fwd_tmp_bytes"] = -1;
  EXPECT_TRUE(ProfileRejected(j, "/stages/2/fwd_tmp_bytes", "-1 is negative, but sizes are byte counts (>= 0)"));
  j = valid_profile();
  j["input_bytes"] = -8;
  EXPECT_TRUE(ProfileRejected(j, "/input_bytes", "-8 is negative"));
  j = valid_profile();
  j["static_bytes"] = -1;
  EXPECT_TRUE(ProfileRejected(j, "/static_bytes", "-1 is negative"));
  j = valid_profile();
  j["loss"]["bwd_tmp_bytes"] = -2;
  EXPECT_TRUE(ProfileRejected(j, "/loss/bwd_tmp_bytes", "-2 is negative"));
}

TEST(ProfileErrors, BytesBeyondInt64) {
  json j = valid_profile();
  j["stages"][0]["saved_bytes"] = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(ProfileRejected(j, "/stages/0/saved_bytes",
                              "18446744073709551615 is larger than the largest 64-bit integer"));
  j["stages"][0]["saved_bytes"] = uint64_t{1} << 63;
  EXPECT_TRUE(ProfileRejected(j, "/stages/0/saved_bytes", "is larger than the largest 64-bit integer"));
  j["stages"][0]["saved_bytes"] = 1e19;
  EXPECT_TRUE(ProfileRejected(j, "/stages/0/saved_bytes", "1e+19 is larger than the largest 64-bit integer"));
  // Fits int64 but not any device: a unit mistake (see Note [Why totals are bounded]).
  j["stages"][0]["saved_bytes"] = kInt64Max;
  EXPECT_TRUE(ProfileRejected(j, "/stages/0/saved_bytes", "above 2^60 bytes (1 EiB) in total"));
}

TEST(ProfileErrors, NonFiniteNumbers) {
  // JSON text cannot spell NaN, but a json built in code can hold one.
  json j = valid_profile();
  j["stages"][1]["fwd_ms"] = std::nan("");
  EXPECT_TRUE(ProfileRejected(j, "/stages/1/fwd_ms", "nan is not a finite number"));
  j = valid_profile();
  j["loss"]["bwd_ms"] = -INFINITY;
  EXPECT_TRUE(ProfileRejected(j, "/loss/bwd_ms", "-inf is not a finite number"));
  j = valid_profile();
  j["link"]["d2h_bytes_per_s"] = INFINITY;
  EXPECT_TRUE(ProfileRejected(j, "/link/d2h_bytes_per_s", "inf is not a finite number"));
  j = valid_profile();
  j["stages"][0]["out_bytes"] = std::nan("");
  EXPECT_TRUE(ProfileRejected(j, "/stages/0/out_bytes", "nan is not a finite number"));
}

TEST(ProfileErrors, NegativeTimes) {
  json j = valid_profile();
  j["stages"][2]["bwd_ms"] = -0.5;
  EXPECT_TRUE(ProfileRejected(j, "/stages/2/bwd_ms", "-0.5 is negative, but times are durations in ms (>= 0)"));
  j = valid_profile();
  j["loss"]["bwd_ms"] = -1;
  EXPECT_TRUE(ProfileRejected(j, "/loss/bwd_ms", "-1 is negative"));
}

TEST(ProfileErrors, SavedLessThanOut) {
  json j = valid_profile();
  j["stages"][1]["saved_bytes"] = 512;
  j["stages"][1]["out_bytes"] = 1024;
  EXPECT_TRUE(ProfileRejected(j, "/stages/1/saved_bytes",
                              "512 is less than out_bytes (1024), but saved_bytes includes the output"));
}

TEST(ProfileErrors, EmptyChain) {
  json j = valid_profile();
  j["stages"] = json::array();
  EXPECT_TRUE(ProfileRejected(j, "/stages", "the chain has no stages, but it needs at least one"));
}

TEST(ProfileErrors, LinkBandwidthNotPositive) {
  json j = valid_profile();
  j["link"]["h2d_bytes_per_s"] = 0;
  EXPECT_TRUE(ProfileRejected(j, "/link/h2d_bytes_per_s", "0 is not a positive finite bandwidth"));
  j["link"]["h2d_bytes_per_s"] = -1e9;
  EXPECT_TRUE(ProfileRejected(j, "/link/h2d_bytes_per_s", "-1e+09 is not a positive finite bandwidth"));
}

TEST(ProfileErrors, TotalsBeyondAnyDevice) {
  json j = valid_profile();
  j["stages"][0]["fwd_ms"] = 6e14;
  j["stages"][1]["fwd_ms"] = 6e14;
  EXPECT_TRUE(ProfileRejected(j, "/stages/1/fwd_ms", "above 1e15 ms (31,700 years) in total"));
}

// ---- files ----

TEST_F(ProfileFile, WriteThenReadRoundTrips) {
  const Profile p = sample_profile(true);
  write_json_atomic(path("p.json"), profile_to_json(p));
  ExpectSameProfile(read_profile(path("p.json")), p);
  EXPECT_EQ(files(), std::set<std::string>{"p.json"});
  EXPECT_TRUE(read_text("p.json").ends_with("}\n"));
}

TEST_F(ProfileFile, MalformedJsonNamesFileAndLine) {
  write_text("p.json", "{\n  \"format\": \"memopt.profile\",\n  \"version\": 1,,\n}\n");
  try {
    read_profile(path("p.json"));
    FAIL() << "accepted malformed JSON";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.starts_with(path("p.json") + ": not valid JSON: ")) << msg;
    EXPECT_TRUE(Contains(msg, "line 3, column 16"));
    EXPECT_TRUE(Contains(msg, "; fix the syntax or regenerate the file with `memopt profile ... --out " +
                                  path("p.json") + "`"));
    EXPECT_FALSE(Contains(msg, "[json.exception"));
  }
}

TEST_F(ProfileFile, DeepNestingIsRefusedNotACrash) {
  // nlohmann copies and prints recursively: 100,000 levels would overflow the stack.
  const int depth = 100000;
  std::string text = "{\"format\": \"memopt.profile\", \"version\": 1, \"model\": ";
  for (int i = 0; i < depth; ++i) text += "{\"a\": ";
  text += "1";
  text += std::string(depth, '}');
  text += "}";
  write_text("deep.json", text);
  try {
    read_profile(path("deep.json"));
    FAIL() << "accepted 100,000 nested objects";
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("deep.json") + ": values nest deeper than 64 levels"));
  }
}

TEST_F(ProfileFile, EmptyFileAndOverflowingNumber) {
  write_text("empty.json", "");
  EXPECT_THROW(read_profile(path("empty.json")), FormatError);
  write_text("big.json", "{\"format\": \"memopt.profile\", \"version\": 1, \"input_bytes\": 1e999}");
  try {
    read_profile(path("big.json"));
    FAIL() << "accepted 1e999";
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("big.json") + ": not valid JSON: number overflow parsing '1e999'"));
  }
}

TEST_F(ProfileFile, MissingFileSaysSo) {
  try {
    read_profile(path("nope.json"));
    FAIL() << "read a missing file";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(Contains(msg, path("nope.json") + ": cannot open the file (No such file or directory); check the path"));
  }
}

TEST_F(ProfileFile, DirectoryIsNotAFile) {
  fs::create_directory(path("d.json"));
  try {
    read_profile(path("d.json"));
    FAIL() << "read a directory";
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("d.json") + ": is a directory, not a file"));
  }
}

TEST_F(ProfileFile, ErrorsInsideTheFileNameIt) {
  json j = valid_profile();
  j["stages"][2]["saved_bytes"] = 1;
  write_json_atomic(path("p.json"), j);
  try {
    read_profile(path("p.json"));
    FAIL() << "accepted saved_bytes < out_bytes";
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("p.json") + ": /stages/2/saved_bytes: 1 is less than out_bytes (4)"));
  }
}

// ---- the bundled example ----

TEST(ExampleProfile, LoadsAndMatchesItsAnalyticModel) {
  const std::string file = std::string(MEMOPT_SOURCE_DIR) + "/tests/data/gpt2_small_example.profile.json";
  const Profile p = read_profile(file);
  EXPECT_FALSE(p.measured);  // modeled, and it must say so
  const json& m = p.model;
  const int64_t B = m.at("batch"), T = m.at("seq_len"), C = m.at("n_embd"), H = m.at("n_head"), V = m.at("vocab");
  const int n_layer = m.at("n_layer");
  const Chain& c = p.chain;
  ASSERT_EQ(c.length(), n_layer + 2);  // embed, the blocks, ln_f + head + loss
  EXPECT_EQ(c.stages.front().name, "embed");
  EXPECT_EQ(c.input_bytes, B * T * 8);  // int64 token ids
  // An fp32 block: 66 B·T·C-sized bytes, 9 per attention-score element (probs,
  // dropout mask at 1 byte, dropped probs) and LayerNorm statistics (the count of
  // Korthikanti et al. 2022, section 4.1, at 4 bytes a float).
  const int64_t N = B * T * C, S = B * H * T * T;
  for (int i = 1; i <= n_layer; ++i) {
    SCOPED_TRACE(c.stages[i].name);
    EXPECT_EQ(c.stages[i].out_bytes, 4 * N);
    EXPECT_EQ(c.stages[i].saved_bytes, 66 * N + 9 * S + 16 * B * T);
    EXPECT_EQ(c.stages[i].fwd_ms, c.stages[1].fwd_ms);  // identical blocks
  }
  const Stage& last = c.stages.back();
  EXPECT_EQ(last.out_bytes, 4);                      // a_L is the scalar loss
  EXPECT_GE(last.saved_bytes, B * T * V * 4);        // log-probabilities over the vocabulary
  EXPECT_GE(last.fwd_tmp_bytes, B * T * V * 4);      // the logits themselves
  EXPECT_TRUE(c.link.has_value());
  EXPECT_EQ(validate(c), "");
  // Written back, it is the file but for what the reader drops: the note, the
  // command and the estimator's per-stage extras.
  json committed = json::parse(testing::file_text(file));
  committed.erase("note");
  committed.erase("command");
  for (json& stage : committed.at("stages"))
    for (const char* extra : {"fwd_flop", "fwd_bytes_moved", "fwd_tmp_grad_bytes", "fwd_tmp_nograd_bytes"})
      stage.erase(extra);
  EXPECT_EQ(format_json(profile_to_json(p)), format_json(committed));
  // A write and a read give back the same profile.
  const std::string copy = (fs::temp_directory_path() / ("memopt_example_" + std::to_string(::getpid()) + ".json")).string();
  write_json_atomic(copy, profile_to_json(p));
  ExpectSameProfile(read_profile(copy), p);
  fs::remove(copy);
}

// Note [A stage run back to back] in solver/chain/chain.h: the optional pair time is read
// back as written, an absent one stays absent, and a bad one names its field.
TEST(ProfileJson, ReadsABackToBackTime) {
  const std::string text = R"({"format": "memopt.profile", "version": 1, "input_bytes": 8,
    "stages": [{"name": "s", "fwd_ms": 1, "bwd_ms": 2, "fwd_bwd_pair_ms": 2.5,
                "out_bytes": 8, "saved_bytes": 8, "fwd_tmp_bytes": 0, "bwd_tmp_bytes": 0},
               {"name": "t", "fwd_ms": 1, "bwd_ms": 2, "out_bytes": 8, "saved_bytes": 8,
                "fwd_tmp_bytes": 0, "bwd_tmp_bytes": 0}]})";
  const Profile p = parse_profile(text, "p.json");
  EXPECT_EQ(p.chain.stages[0].fwd_bwd_pair_ms, 2.5);
  EXPECT_FALSE(p.chain.stages[1].fwd_bwd_pair_ms.has_value());
  EXPECT_EQ(p.chain.ub_after_keep(0), 1.5);
  EXPECT_EQ(p.chain.ub_after_keep(1), 2.0);
  std::string bad = text;
  bad.replace(bad.find("2.5"), 3, "-2.5");
  try {
    parse_profile(bad, "p.json");
    ADD_FAILURE() << "a negative fwd_bwd_pair_ms was accepted";
  } catch (const std::exception& e) {
    EXPECT_TRUE(Contains(e.what(), "/stages/0/fwd_bwd_pair_ms")) << e.what();
  }
}

}  // namespace
}  // namespace memopt::solver

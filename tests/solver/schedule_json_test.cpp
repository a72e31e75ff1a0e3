// schedule_json_test.cpp: schedule.json read and written -- every op kind round-trips,
// one op per line, optional fields, one test per class of bad input (each error must
// name the file, the JSON path and the fix) and files on disk.
//   ctest --test-dir build -R 'Schedule'
#include <cstdint>
#include <iterator>
#include <set>
#include <string>

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
using testing::sample_profile;
using testing::sample_schedule;

const std::string kScheduleSource = "bad.schedule.json";
const std::string kScheduleFix = "regenerate it with `memopt solve --profile P.json --budget B --out bad.schedule.json`";

json valid_schedule() { return schedule_to_json(sample_schedule()); }

::testing::AssertionResult ScheduleRejected(const json& j, const std::string& path, const std::string& what,
                                            const std::string& fix = kScheduleFix) {
  return testing::Rejected(schedule_from_json, kScheduleSource, j, path, what, fix);
}

class ScheduleFile : public testing::TempDir {};

TEST(ScheduleJson, RoundTripEveryOpKind) {
  const Schedule s = sample_schedule();
  std::set<OpKind> kinds;
  for (const Op& op : s.ops) kinds.insert(op.kind);
  ASSERT_EQ(kinds.size(), std::size(kOpKinds));  // the sample covers the whole table
  for (const json& j : {schedule_to_json(s), json::parse(format_json(schedule_to_json(s)))}) {
    const Schedule back = schedule_from_json(j, "mem");
    EXPECT_EQ(back.solver, s.solver);
    EXPECT_EQ(back.budget_bytes, s.budget_bytes);
    EXPECT_EQ(back.chain_length, s.chain_length);
    EXPECT_EQ(back.predicted.peak_bytes, s.predicted.peak_bytes);
    EXPECT_EQ(back.predicted.time_ms, s.predicted.time_ms);
    EXPECT_EQ(back.ops, s.ops);
  }
}

TEST(ScheduleJson, WriterPutsOneOpPerLine) {
  const std::string text = format_json(valid_schedule());
  EXPECT_TRUE(text.starts_with("{\n  \"format\": \"memopt.schedule\",\n  \"version\": 1,\n  \"solver\": \"optimal\",\n"))
      << text;
  EXPECT_TRUE(Contains(text, "  \"predicted\": {\n    \"peak_bytes\": 3990000000,\n    \"time_ms\": 812.5\n  },\n"));
  EXPECT_TRUE(Contains(text, "  \"ops\": [\n    [\"fwd_ckpt\", 0],\n    [\"offload\", 0],\n"));
  EXPECT_TRUE(Contains(text, "    [\"loss\"],\n"));
  EXPECT_TRUE(Contains(text, "    [\"bwd\", 0],\n    [\"wait_offloads\"],\n    [\"offload_saved\", 3],\n    [\"prefetch_saved\", 3],\n"
                             "    [\"offload_input\", 2],\n    [\"prefetch_input\", 2],\n    [\"offload_carried\", 2],\n    [\"prefetch_carried\", 2]\n  ]\n}"));
}

TEST(ScheduleJson, WrittenTextIsTheDocumentedLayout) {
  Schedule s;
  s.solver = "sqrt";
  s.budget_bytes = 1024;
  s.chain_length = 1;
  s.predicted = {1000, 2.5};
  s.ops = {{OpKind::FwdKeep, 0}, {OpKind::Loss, -1}, {OpKind::Bwd, 0}};
  EXPECT_EQ(format_json(schedule_to_json(s)), R"({
  "format": "memopt.schedule",
  "version": 1,
  "solver": "sqrt",
  "budget_bytes": 1024,
  "chain_length": 1,
  "predicted": {
    "peak_bytes": 1000,
    "time_ms": 2.5
  },
  "ops": [
    ["fwd_keep", 0],
    ["loss"],
    ["bwd", 0]
  ]
})");
}

TEST(ScheduleJson, PredictedAndSolverAreOptional) {
  json j = valid_schedule();
  j.erase("predicted");
  j.erase("solver");
  j["comment"] = "edited by hand";  // extra fields are ignored
  const Schedule s = schedule_from_json(j, "hand.json");
  EXPECT_EQ(s.solver, "");
  EXPECT_EQ(s.predicted.peak_bytes, 0);
  EXPECT_EQ(s.ops, sample_schedule().ops);
}

// Where the schedule's profile was measured travels with it when known, and an old
// schedule without it still reads.
TEST(ScheduleJson, ProfiledOnRoundTripsAndIsOptional) {
  Schedule s = sample_schedule();
  EXPECT_FALSE(valid_schedule().contains("profiled_on"));
  s.profiled_on = {"cuda", "bfloat16"};
  const json j = schedule_to_json(s);
  EXPECT_EQ(j.at("profiled_on").at("device"), "cuda");
  const Schedule back = schedule_from_json(j, "s.json");
  EXPECT_EQ(back.profiled_on.device, "cuda");
  EXPECT_EQ(back.profiled_on.dtype, "bfloat16");
  json bad = j;
  bad["profiled_on"]["device"] = 3;
  EXPECT_TRUE(ScheduleRejected(bad, "/profiled_on/device", "string"));
}

TEST(ScheduleJson, ProfiledOnNamesTheProfilesDeviceAndDtype) {
  Profile p = sample_profile(/*with_link=*/false);
  p.measured = true;
  p.device = {{"kind", "cpu"}};
  EXPECT_EQ(profiled_on(p).device, "cpu");
  EXPECT_EQ(profiled_on(p).dtype, "float32");  // absent: float32
  p.device = {{"kind", "cuda"}, {"name", "h100-sxm"}};
  p.model["dtype"] = "bfloat16";
  p.measured = false;
  EXPECT_EQ(profiled_on(p).device, "modeled h100-sxm");
  EXPECT_EQ(profiled_on(p).dtype, "bfloat16");
}

// ---- one test per class of bad input ----

TEST(ScheduleErrors, WrongFormatOrVersion) {
  json j = valid_schedule();
  j["format"] = "memopt.schedules";
  EXPECT_TRUE(ScheduleRejected(j, "/format", "\"memopt.schedules\" is not \"memopt.schedule\""));
  EXPECT_TRUE(ScheduleRejected(profile_to_json(sample_profile(true)), "/format", "this file is not a memopt schedule",
                               "pass the schedule.json written by `memopt solve`"));
  j = valid_schedule();
  j["version"] = 0;
  EXPECT_TRUE(ScheduleRejected(j, "/version", "0 is not a version this memopt reads"));
  EXPECT_TRUE(ScheduleRejected(json::array({"fwd_keep", 0}), "/", "expected an object, found an array"));
}

TEST(ScheduleErrors, BadChainLength) {
  for (const json& bad : {json(0), json(-1), json(int64_t{1} << 40)}) {
    json j = valid_schedule();
    j["chain_length"] = bad;
    EXPECT_TRUE(ScheduleRejected(j, "/chain_length", bad.dump() + " is not a number of stages"));
  }
  json j = valid_schedule();
  j["chain_length"] = "3";
  EXPECT_TRUE(ScheduleRejected(j, "/chain_length", "found a string"));
  j["chain_length"] = 2.5;
  EXPECT_TRUE(ScheduleRejected(j, "/chain_length", "2.5 is not a whole number"));
  j.erase("chain_length");
  EXPECT_TRUE(ScheduleRejected(j, "/chain_length", "missing, but it is required"));
}

TEST(ScheduleErrors, BadBudget) {
  json j = valid_schedule();
  j["budget_bytes"] = 0;
  EXPECT_TRUE(ScheduleRejected(j, "/budget_bytes", "0 is not a positive budget in bytes"));
  j["budget_bytes"] = -5;
  EXPECT_TRUE(ScheduleRejected(j, "/budget_bytes", "-5 is not a positive budget"));
  j["budget_bytes"] = 1e30;
  EXPECT_TRUE(ScheduleRejected(j, "/budget_bytes", "larger than the largest 64-bit integer"));
  j["budget_bytes"] = "4GiB";
  EXPECT_TRUE(ScheduleRejected(j, "/budget_bytes", "found a string (\"4GiB\")"));
  j.erase("budget_bytes");
  EXPECT_TRUE(ScheduleRejected(j, "/budget_bytes", "missing"));
}

TEST(ScheduleErrors, BadPredicted) {
  json j = valid_schedule();
  j["predicted"] = 812.5;
  EXPECT_TRUE(ScheduleRejected(j, "/predicted", "expected an object"));
  j = valid_schedule();
  j["predicted"]["time_ms"] = -1;
  EXPECT_TRUE(ScheduleRejected(j, "/predicted/time_ms", "-1 is negative"));
  j = valid_schedule();
  j["predicted"]["peak_bytes"] = -1;
  EXPECT_TRUE(ScheduleRejected(j, "/predicted/peak_bytes", "-1 is negative"));
  j = valid_schedule();
  j["predicted"].erase("peak_bytes");
  EXPECT_TRUE(ScheduleRejected(j, "/predicted/peak_bytes", "missing"));
}

TEST(ScheduleErrors, OpsNotAnArrayOfArrays) {
  json j = valid_schedule();
  j["ops"] = "fwd_keep 0";
  EXPECT_TRUE(ScheduleRejected(j, "/ops", "expected an array, found a string"));
  j = valid_schedule();
  j["ops"][3] = {{"op", "fwd_keep"}, {"index", 2}};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/3", "expected an array, found an object; an op is [\"word\", index]"));
  j["ops"][3] = json::array();
  EXPECT_TRUE(ScheduleRejected(j, "/ops/3", "has 0 elements, but an op is"));
  j["ops"][3] = {"fwd_keep", 2, 0};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/3", "has 3 elements"));
  j.erase("ops");
  EXPECT_TRUE(ScheduleRejected(j, "/ops", "missing"));
}

TEST(ScheduleErrors, UnknownOpWord) {
  json j = valid_schedule();
  j["ops"][2][0] = "fwd_kep";
  EXPECT_TRUE(ScheduleRejected(
      j, "/ops/2/0",
      "\"fwd_kep\" is not an op; the ops are fwd_keep, fwd_ckpt, fwd_drop, loss, bwd, offload, prefetch"));
  j["ops"][2][0] = 7;
  EXPECT_TRUE(ScheduleRejected(j, "/ops/2/0", "expected a string, found a number (7)"));
}

TEST(ScheduleErrors, IndexPresentIffTheOpTakesOne) {
  json j = valid_schedule();
  j["ops"][0] = {"fwd_ckpt"};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/0", "fwd_ckpt needs an index, as in [\"fwd_ckpt\", 3]"));
  j = valid_schedule();
  j["ops"][4] = {"loss", 3};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/4", "loss takes no index: write [\"loss\"]"));
  j = valid_schedule();
  j["ops"][4] = {"wait_offloads", 0};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/4", "wait_offloads takes no index: write [\"wait_offloads\"]"));
}

TEST(ScheduleErrors, BadIndex) {
  json j = valid_schedule();
  j["ops"][5][1] = -1;
  EXPECT_TRUE(ScheduleRejected(j, "/ops/5/1", "-1 is negative, but indices count from 0"));
  j["ops"][5][1] = 1.5;
  EXPECT_TRUE(ScheduleRejected(j, "/ops/5/1", "1.5 is not a whole number, but op indices are integers"));
  j["ops"][5][1] = "2";
  EXPECT_TRUE(ScheduleRejected(j, "/ops/5/1", "found a string"));
}

TEST(ScheduleErrors, IndexBeyondTheChain) {
  // chain_length is 3: stages 0..2, activations a_0..a_3.
  json j = valid_schedule();
  j["ops"][3] = {"fwd_keep", 3};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/3/1", "stage 3 does not exist: /chain_length is 3, so fwd_keep takes 0..2"));
  j = valid_schedule();
  j["ops"][5] = {"bwd", 99};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/5/1", "stage 99 does not exist"));
  j = valid_schedule();
  j["ops"][1] = {"offload", 4};
  EXPECT_TRUE(ScheduleRejected(j, "/ops/1/1", "activation 4 does not exist: /chain_length is 3, so offload takes 0..3"));
  // a_L is an activation like any other: offloading it is a format-level yes.
  j["ops"][1] = {"offload", 3};
  j["ops"][6] = {"prefetch", 3};
  EXPECT_NO_THROW(schedule_from_json(j, "mem"));
}

// ---- files ----

TEST_F(ScheduleFile, WriteThenReadRoundTrips) {
  write_json_atomic(path("s.json"), valid_schedule());
  EXPECT_EQ(read_schedule(path("s.json")).ops, sample_schedule().ops);
}

TEST_F(ScheduleFile, MalformedAndMissing) {
  write_text("s.json", "{\"format\": \"memopt.schedule\", \"ops\": [[\"loss\"]");
  try {
    read_schedule(path("s.json"));
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("s.json") + ": not valid JSON: parse error at line 1"));
    EXPECT_TRUE(Contains(e.what(), "memopt solve --profile P.json --budget B --out " + path("s.json")));
  }
  try {
    read_schedule(path("none.json"));
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_TRUE(Contains(e.what(), path("none.json") + ": cannot open the file (No such file or directory)"));
  }
}

}  // namespace
}  // namespace memopt::solver

// io_test.cpp: the solver's border -- Chain's accessors and validate(), the op table,
// profile/schedule JSON round trips, one test per class of bad input (each error must
// name the file, the JSON path and the fix), and atomic writes.
// Also checks that the bundled example profile loads.
//   ctest --test-dir build -R 'Chain|OpKind|Profile|Schedule|Atomic|Format|Example'
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "solver/chain.h"
#include "solver/io.h"
#include "solver/schedule.h"

namespace memopt::solver {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
const std::string kProfileSource = "bad.profile.json";
const std::string kScheduleSource = "bad.schedule.json";
const std::string kProfileFix = "regenerate the file with `memopt profile ... --out bad.profile.json`";
const std::string kScheduleFix = "regenerate it with `memopt solve --profile P.json --budget B --out bad.schedule.json`";

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\"\n  does not contain \"" << part << "\"";
}

// Three stages with awkward doubles (they must survive the text round trip bit for
// bit) and every size different, so that a field read into the wrong member shows.
Profile sample_profile(bool with_link) {
  Profile p;
  p.model = {{"name", "toy"}, {"n_layer", 1}, {"dtype", "float32"}};
  p.device = {{"kind", "cpu"}, {"name", "test cpu"}, {"threads", 1}};
  p.measured = false;
  p.static_bytes = 123456789;
  Chain& c = p.chain;
  c.input_bytes = 4096;
  c.stages = {
      {"embed", 0.1, 1.0 / 3.0, 1000, 1500, 10, 20},
      {"block.0", 2.5e-7, 12.75, 2000, 2000, 0, 30},
      {"head+loss", 7.0, 1e-300, 4, 8004, 50000, 60000},
  };
  c.loss = {0.125, 7};
  if (with_link) c.link = Link{1.2e10, 1.1e10};
  return p;
}

void ExpectSameProfile(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.measured, b.measured);
  EXPECT_EQ(a.static_bytes, b.static_bytes);
  EXPECT_EQ(a.chain.input_bytes, b.chain.input_bytes);
  ASSERT_EQ(a.chain.length(), b.chain.length());
  for (int i = 0; i < a.chain.length(); ++i) {
    SCOPED_TRACE("stage " + std::to_string(i));
    const Stage& s = a.chain.stages[i];
    const Stage& t = b.chain.stages[i];
    EXPECT_EQ(s.name, t.name);
    // Exact: the writer prints the shortest text that reads back as the same double.
    EXPECT_EQ(s.fwd_ms, t.fwd_ms);
    EXPECT_EQ(s.bwd_ms, t.bwd_ms);
    EXPECT_EQ(s.out_bytes, t.out_bytes);
    EXPECT_EQ(s.saved_bytes, t.saved_bytes);
    EXPECT_EQ(s.fwd_tmp_bytes, t.fwd_tmp_bytes);
    EXPECT_EQ(s.bwd_tmp_bytes, t.bwd_tmp_bytes);
  }
  EXPECT_EQ(a.chain.loss.bwd_ms, b.chain.loss.bwd_ms);
  EXPECT_EQ(a.chain.loss.bwd_tmp_bytes, b.chain.loss.bwd_tmp_bytes);
  ASSERT_EQ(a.chain.link.has_value(), b.chain.link.has_value());
  if (a.chain.link) {
    EXPECT_EQ(a.chain.link->d2h_bytes_per_s, b.chain.link->d2h_bytes_per_s);
    EXPECT_EQ(a.chain.link->h2d_bytes_per_s, b.chain.link->h2d_bytes_per_s);
  }
}

Schedule sample_schedule() {
  Schedule s;
  s.solver = "optimal";
  s.budget_bytes = 4000000000;
  s.chain_length = 3;
  s.predicted = {3990000000, 812.5};
  s.ops = {{OpKind::FwdCkpt, 0}, {OpKind::Offload, 0},  {OpKind::FwdDrop, 1}, {OpKind::FwdKeep, 2},
           {OpKind::Loss, -1},   {OpKind::Bwd, 2},      {OpKind::Prefetch, 0}, {OpKind::FwdKeep, 0},
           {OpKind::FwdKeep, 1}, {OpKind::Bwd, 1},      {OpKind::Bwd, 0},
           // IO only: the table's words, not a runnable order.
           {OpKind::OffloadSaved, 3}, {OpKind::PrefetchSaved, 3}};
  return s;
}

json valid_profile() { return profile_to_json(sample_profile(true)); }
json valid_schedule() { return schedule_to_json(sample_schedule()); }

// The reader must refuse `j` with "<source>: <path>: ...<what>...; ...<fix>".
template <class Read>
::testing::AssertionResult Rejected(Read read, const std::string& source, const json& j, const std::string& path,
                                    const std::string& what, const std::string& fix) {
  try {
    read(j, source);
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    if (!msg.starts_with(source + ": " + path + ": "))
      return ::testing::AssertionFailure() << "\"" << msg << "\"\n  does not start with \"" << source << ": " << path
                                           << ": \"";
    if (auto r = Contains(msg, what); !r) return r;
    if (auto r = Contains(msg, "; "); !r) return r;
    return Contains(msg, fix);
  }
  return ::testing::AssertionFailure() << "accepted " << j.dump();
}

::testing::AssertionResult ProfileRejected(const json& j, const std::string& path, const std::string& what,
                                           const std::string& fix = kProfileFix) {
  return Rejected(profile_from_json, kProfileSource, j, path, what, fix);
}

::testing::AssertionResult ScheduleRejected(const json& j, const std::string& path, const std::string& what,
                                            const std::string& fix = kScheduleFix) {
  return Rejected(schedule_from_json, kScheduleSource, j, path, what, fix);
}

// A fresh directory per test, removed afterwards.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "memopt_io_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_text(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  std::string read_text(const std::string& name) const {
    std::ifstream in(path(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }

  fs::path dir_;
};

// ---- Chain ----

TEST(Chain, AccessorsFollowSpecConventions) {
  const Chain c = sample_profile(false).chain;
  const int L = c.length();
  ASSERT_EQ(L, 3);
  EXPECT_EQ(c.x(0), 4096);  // a_0 is the input
  EXPECT_EQ(c.x(1), 1000);
  EXPECT_EQ(c.x(L), 4);
  EXPECT_EQ(c.x(L + 1), 0);  // x_{L+1} = 0
  EXPECT_EQ(c.xbar(1), 1500);
  EXPECT_EQ(c.xbar(L), 8004);
  EXPECT_EQ(c.xbar(L + 1), 0);  // x̄_{L+1} = 0
  EXPECT_EQ(c.uf(0), 0.1);
  EXPECT_EQ(c.uf(L), 0.0);  // the loss has no forward
  EXPECT_EQ(c.ub(1), 12.75);
  EXPECT_EQ(c.ub(L), 0.125);  // ub_L is the loss backward
  EXPECT_EQ(c.ftmp(2), 50000);
  EXPECT_EQ(c.ftmp(L), 0);
  EXPECT_EQ(c.btmp(2), 60000);
  EXPECT_EQ(c.btmp(L), 7);
}

TEST(Chain, SumFwdBwdCountsEveryStageOnceAndTheLoss) {
  const Chain c = sample_profile(false).chain;
  const double expected = 0.1 + 1.0 / 3.0 + 2.5e-7 + 12.75 + 7.0 + 1e-300 + 0.125;
  // Sums of a handful of doubles: a few ulps of the total.
  EXPECT_NEAR(sum_fwd_bwd_ms(c), expected, 1e-12 * expected);
}

TEST(Chain, ValidateAcceptsTheSampleAndZeroes) {
  EXPECT_EQ(validate(sample_profile(true).chain), "");
  Chain zeros;
  zeros.stages.resize(2);  // all sizes and times 0: legal, if useless
  EXPECT_EQ(validate(zeros), "");
}

TEST(Chain, ValidateNamesTheFieldOfEachBrokenInvariant) {
  const Chain good = sample_profile(true).chain;
  struct Case {
    const char* name;
    void (*mutate)(Chain&);
    const char* message_start;
  };
  const Case cases[] = {
      {"no stages", [](Chain& c) { c.stages.clear(); }, "/stages: the chain has no stages"},
      {"negative input", [](Chain& c) { c.input_bytes = -8; }, "/input_bytes: -8 is negative"},
      {"negative out", [](Chain& c) { c.stages[1].out_bytes = -1; }, "/stages/1/out_bytes: -1 is negative"},
      {"negative tmp", [](Chain& c) { c.stages[2].bwd_tmp_bytes = -3; }, "/stages/2/bwd_tmp_bytes: -3 is negative"},
      {"nan time", [](Chain& c) { c.stages[0].fwd_ms = std::nan(""); }, "/stages/0/fwd_ms: nan is not a finite"},
      {"inf time", [](Chain& c) { c.stages[2].bwd_ms = INFINITY; }, "/stages/2/bwd_ms: inf is not a finite"},
      {"negative time", [](Chain& c) { c.stages[1].bwd_ms = -0.5; }, "/stages/1/bwd_ms: -0.5 is negative"},
      {"saved < out", [](Chain& c) { c.stages[1].saved_bytes = 512; },
       "/stages/1/saved_bytes: 512 is less than out_bytes (2000), but saved_bytes includes the output"},
      {"loss time", [](Chain& c) { c.loss.bwd_ms = -1; }, "/loss/bwd_ms: -1 is negative"},
      {"loss tmp", [](Chain& c) { c.loss.bwd_tmp_bytes = -1; }, "/loss/bwd_tmp_bytes: -1 is negative"},
      {"zero d2h", [](Chain& c) { c.link->d2h_bytes_per_s = 0; }, "/link/d2h_bytes_per_s: 0 is not a positive"},
      {"nan h2d", [](Chain& c) { c.link->h2d_bytes_per_s = std::nan(""); }, "/link/h2d_bytes_per_s: nan is not"},
      {"exabytes", [](Chain& c) { c.stages[2].saved_bytes = int64_t{1} << 61; },
       "/stages/2/saved_bytes: 2305843009213693952 brings the chain's sizes above 2^60 bytes"},
      {"eons", [](Chain& c) { c.stages[1].fwd_ms = 2e15; }, "/stages/1/fwd_ms: 2e+15 brings the chain's times above"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Chain c = good;
    k.mutate(c);
    const std::string msg = validate(c);
    EXPECT_TRUE(msg.starts_with(k.message_start)) << msg;
  }
}

// ---- the op table ----

TEST(OpKind, TableIsConsistentAndWordsRoundTrip) {
  std::set<std::string_view> words;
  for (const OpKindInfo& k : kOpKinds) {
    EXPECT_EQ(info(k.kind).kind, k.kind);
    EXPECT_EQ(info(k.kind).word, k.word);
    EXPECT_EQ(op_kind_from_word(k.word), k.kind);
    EXPECT_TRUE(words.insert(k.word).second) << "duplicate word " << k.word;
  }
  EXPECT_EQ(words.size(), 9u);
  EXPECT_FALSE(info(OpKind::OffloadSaved).is_compute);
  EXPECT_FALSE(info(OpKind::PrefetchSaved).is_compute);
  EXPECT_EQ(op_kind_from_word("offload_saved"), OpKind::OffloadSaved);
  EXPECT_FALSE(info(OpKind::Loss).has_index);
  EXPECT_FALSE(info(OpKind::Offload).is_compute);
  EXPECT_FALSE(info(OpKind::Prefetch).is_compute);
  EXPECT_TRUE(info(OpKind::Bwd).is_compute);
}

TEST(OpKind, UnknownWordsAreRejected) {
  EXPECT_EQ(op_kind_from_word("fwd"), std::nullopt);
  EXPECT_EQ(op_kind_from_word("FWD_KEEP"), std::nullopt);  // words are exact
  EXPECT_EQ(op_kind_from_word(""), std::nullopt);
  EXPECT_EQ(op_kind_from_word("loss "), std::nullopt);
}

TEST(OpKind, ToStringPrintsWordAndIndex) {
  EXPECT_EQ(to_string(Op{OpKind::FwdKeep, 3}), "fwd_keep 3");
  EXPECT_EQ(to_string(Op{OpKind::FwdCkpt, 0}), "fwd_ckpt 0");
  EXPECT_EQ(to_string(Op{OpKind::Loss, -1}), "loss");
  EXPECT_EQ(to_string(Op{OpKind::Prefetch, 12}), "prefetch 12");
}

// ---- profile round trips ----

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
  // Keys in the order of docs/formats.md section 2.9, top level and within a stage.
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

// ---- profile: one test per class of bad input ----

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
  EXPECT_TRUE(ProfileRejected(valid_schedule(), "/format", "this file is not a memopt profile",
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

// ---- profile files ----

class ProfileFile : public TempDir {};

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

// ---- schedules ----

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
  EXPECT_TRUE(Contains(text, "    [\"bwd\", 0],\n    [\"offload_saved\", 3],\n    [\"prefetch_saved\", 3]\n  ]\n}"));
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

TEST(ScheduleErrors, WrongFormatOrVersion) {
  json j = valid_schedule();
  j["format"] = "memopt.schedules";
  EXPECT_TRUE(ScheduleRejected(j, "/format", "\"memopt.schedules\" is not \"memopt.schedule\""));
  EXPECT_TRUE(ScheduleRejected(valid_profile(), "/format", "this file is not a memopt schedule",
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

class ScheduleFile : public TempDir {};

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

// ---- atomic writes ----

class AtomicWrite : public TempDir {};

TEST_F(AtomicWrite, ReplacesTheOldFile) {
  write_text("out.json", "old");
  write_json_atomic(path("out.json"), json{{"a", 1}});
  EXPECT_EQ(read_text("out.json"), "{\n  \"a\": 1\n}\n");
  EXPECT_EQ(files(), std::set<std::string>{"out.json"});
}

TEST_F(AtomicWrite, FailedWriteKeepsTheOldFileAndLeavesNoTemp) {
  write_text("out.json", "old");
  // A file size limit makes write() fail half way, like a full disk, even as root.
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    write_json_atomic(path("out.json"), valid_profile());
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, SIG_DFL);
  EXPECT_TRUE(Contains(error, path("out.json") + ": writing " + path("out.json") + ".tmp."));
  EXPECT_TRUE(Contains(error, "(File too large); " + path("out.json") + " is unchanged"));
  EXPECT_EQ(read_text("out.json"), "old");
  EXPECT_EQ(files(), std::set<std::string>{"out.json"});
}

TEST_F(AtomicWrite, RenameOntoADirectoryFailsCleanly) {
  fs::create_directory(path("out.json"));
  try {
    write_json_atomic(path("out.json"), json{{"a", 1}});
    FAIL() << "wrote over a directory";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), path("out.json") + ": renaming "));
  }
  EXPECT_EQ(files(), std::set<std::string>{"out.json"});
  EXPECT_TRUE(fs::is_directory(path("out.json")));
}

TEST_F(AtomicWrite, MissingDirectoryNamesThePath) {
  try {
    write_json_atomic(path("no/such/dir/out.json"), json{{"a", 1}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), path("no/such/dir/out.json") + ": cannot create "));
    EXPECT_TRUE(Contains(e.what(), "check that the directory exists"));
  }
  EXPECT_TRUE(files().empty());
}

TEST_F(AtomicWrite, UnwritableValueKeepsTheOldFile) {
  write_text("out.json", "old");
  json j = valid_profile();
  j["stages"][1]["fwd_ms"] = std::nan("");
  try {
    write_json_atomic(path("out.json"), j);
    FAIL() << "wrote NaN";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(Contains(e.what(), path("out.json") + ": not written"));
    EXPECT_TRUE(Contains(e.what(), "/stages/1/fwd_ms: nan cannot be written as JSON"));
  }
  EXPECT_EQ(read_text("out.json"), "old");
  EXPECT_EQ(files(), std::set<std::string>{"out.json"});
}

TEST(FormatJson, LayoutOfNestedValues) {
  const json j = {{"zeta", json::array({json::array({1, 2}), json::object()})},
                  {"alpha", json::array()},
                  {"name", "x\"y"},
                  {"format", "f"}};
  // Known keys first in the documented order, then the rest alphabetically.
  EXPECT_EQ(format_json(j),
            "{\n  \"format\": \"f\",\n  \"name\": \"x\\\"y\",\n  \"alpha\": [],\n  \"zeta\": [\n    [1, 2],\n"
            "    {}\n  ]\n}");
  EXPECT_EQ(format_json(json(3)), "3");
  EXPECT_EQ(json::parse(format_json(j)), j);
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
  // dropout mask at 1 byte, dropped probs) and LayerNorm statistics; see the script.
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
  // A write and a read give back the same profile.
  const std::string copy = (fs::temp_directory_path() / ("memopt_example_" + std::to_string(::getpid()) + ".json")).string();
  write_json_atomic(copy, profile_to_json(p));
  ExpectSameProfile(read_profile(copy), p);
  fs::remove(copy);
}

}  // namespace
}  // namespace memopt::solver

namespace memopt::solver {
namespace {

// memopt's extension (Note [Two forward temporaries]): optional, round-trips,
// validated like every size, and absent means "the same as fwd_tmp_bytes".
TEST(IoKeepTmp, OptionalFieldRoundTripsAndDefaultsToFwdTmp) {
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

}  // namespace
}  // namespace memopt::solver

// json_printer_test.cpp: the text of written files -- keys in the order the value
// holds them, arrays of scalars on one line, NaN and infinity refused -- against
// hand-written text, and write_json_atomic's replace-or-keep.
//   ctest --test-dir build -R 'FormatJson|AtomicWrite'
#include <signal.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"
#include "tests/solver/contains.h"
#include "tests/solver/json_samples.h"
#include "tests/solver/temp_dir.h"

namespace memopt::solver {
namespace {

using json = nlohmann::ordered_json;
using testing::Contains;
using testing::sample_profile;
namespace fs = std::filesystem;

json valid_profile() { return profile_to_json(sample_profile(true)); }

class AtomicWrite : public testing::TempDir {};

TEST(FormatJson, LayoutOfNestedValues) {
  const json j = {{"zeta", json::array({json::array({1, 2}), json::object()})},
                  {"alpha", json::array()},
                  {"name", "x\"y"},
                  {"format", "f"}};
  // Keys as the value holds them: the printer has no order of its own.
  EXPECT_EQ(format_json(j),
            "{\n  \"zeta\": [\n    [1, 2],\n    {}\n  ],\n  \"alpha\": [],\n  \"name\": \"x\\\"y\",\n"
            "  \"format\": \"f\"\n}");
  EXPECT_EQ(format_json(json(3)), "3");
  EXPECT_EQ(json::parse(format_json(j)), j);
}

TEST(FormatJson, KeysComeInTheOrderTheyWereInserted) {
  json j;
  j["format"] = "memopt.test";
  j["zeta"] = 1;
  j["alpha"] = {{"kind", "cpu"}, {"beta", true}, {"a", nullptr}};
  j["middle"] = "m";
  EXPECT_EQ(format_json(j), R"({
  "format": "memopt.test",
  "zeta": 1,
  "alpha": {
    "kind": "cpu",
    "beta": true,
    "a": null
  },
  "middle": "m"
})");
}

TEST(FormatJson, APlainJsonConvertsWithItsKeysSorted) {
  // nlohmann::json holds its keys sorted; that is the order it arrives in.
  const nlohmann::json plain = {{"zeta", 1}, {"format", "f"}, {"alpha", 2}};
  EXPECT_EQ(format_json(plain), "{\n  \"alpha\": 2,\n  \"format\": \"f\",\n  \"zeta\": 1\n}");
}

TEST(FormatJson, EachArrayOfScalarsStaysOnOneLine) {
  json j;
  j["ops"] = {{"fwd_keep", 3}, {"loss"}, json::array({"bwd", 3})};
  j["param_reads"] = {{0, 524288}};
  j["mixed"] = {1, {2, 3}, "four"};
  j["scalars"] = {1.5, -2, "x", true, nullptr};
  EXPECT_EQ(format_json(j), R"({
  "ops": [
    ["fwd_keep", 3],
    ["loss"],
    ["bwd", 3]
  ],
  "param_reads": [
    [0, 524288]
  ],
  "mixed": [
    1,
    [2, 3],
    "four"
  ],
  "scalars": [1.5, -2, "x", true, null]
})");
}

TEST(FormatJson, NumbersReadBackExactly) {
  json j;
  j["third"] = 1.0 / 3.0;
  j["whole_double"] = 4e9;
  j["tiny"] = 1e-300;
  j["big"] = int64_t{9223372036854775807};
  EXPECT_EQ(format_json(j), R"({
  "third": 0.3333333333333333,
  "whole_double": 4000000000.0,
  "tiny": 1e-300,
  "big": 9223372036854775807
})");
  EXPECT_EQ(json::parse(format_json(j)), j);
}

TEST(FormatJson, NaNAndInfinityAreRefusedNamingThePath) {
  json j;
  j["stages"] = json::array({{{"name", "s"}, {"fwd_ms", std::nan("")}}});
  try {
    format_json(j);
    FAIL() << "printed NaN";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "/stages/0/fwd_ms: nan cannot be written as JSON");
  }
  try {
    format_json(json(-INFINITY));
    FAIL() << "printed -inf";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "/: -inf cannot be written as JSON");
  }
  EXPECT_THROW(format_json(json::array({1.0, INFINITY})), std::invalid_argument);
}

TEST(FormatJson, ExcerptsAreShortAndSpellNonFiniteNumbers) {
  EXPECT_EQ(json_excerpt(json("12")), "\"12\"");
  EXPECT_EQ(json_excerpt(json(std::nan(""))), "nan");
  EXPECT_EQ(json_excerpt(json(INFINITY)), "inf");
  EXPECT_EQ(json_excerpt(json(-INFINITY)), "-inf");
  const std::string cut = json_excerpt(json(std::string(100, 'a')));
  EXPECT_EQ(cut.size(), 40u);
  EXPECT_TRUE(cut.ends_with("...")) << cut;
}

// ---- atomic writes ----

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

}  // namespace
}  // namespace memopt::solver

// units_test.cpp: the byte, budget and bandwidth quantities users type, every accepted
// form and a message for every refused one; byte counts as people read them.
//   ctest --test-dir build -R 'Parse|FormatBytes'
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "solver/chain/units.h"
#include "tests/solver/contains.h"

namespace memopt::solver {
namespace {

using testing::Contains;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(ParseBytes, AcceptedForms) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 0},
      {"17", 17},
      {"4000000000", 4000000000},
      {"4e9", 4000000000},
      {"1.5e3", 1500},
      {"4GiB", 4 * kGiB},
      {"4 GiB", 4 * kGiB},
      {"4gib", 4 * kGiB},
      {"4GIB", 4 * kGiB},
      {"3.5GB", 3500000000},
      {"512MiB", int64_t{512} << 20},
      {"100KB", 100000},
      {"100kb", 100000},
      {"1B", 1},
      {"8 MB", 8000000},
      {"1TB", 1000000000000},
      {"2TiB", int64_t{2} << 40},
      {" 12 kib ", 12288},
      {"0.1KiB", 102},  // 102.4 rounds down: a budget never grows past what was asked
      {"9223372036854775807", kInt64Max},
      {"8388607TiB", int64_t{8388607} << 40},
  };
  for (const auto& [text, bytes] : cases) EXPECT_EQ(parse_bytes(text), bytes) << "'" << text << "'";
}

TEST(ParseBytes, RejectedForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty; write a byte count such as 4000000000, 4e9, 512MiB, 3.5GB or 4GiB"},
      {"   ", "empty"},
      {"-1", "'-1' is negative"},
      {"-1GiB", "'-1GiB' is negative"},
      {"GiB", "'GiB' does not start with a number"},
      {"4 GiG", "'4 GiG' has an unknown unit 'GiG'; write a byte count"},
      {"4GiBs", "unknown unit 'GiBs'"},
      {"4 G", "unknown unit 'G'"},
      {"8EiB", "unknown unit 'EiB'"},
      {"0x10", "unknown unit 'x10'"},
      {"1.5", "'1.5' is not a whole number of bytes"},
      {"1.5B", "not a whole number of bytes"},
      {"1e19", "is more than the largest 64-bit byte count"},
      {"9223372036854775808", "is more than the largest 64-bit byte count"},
      {"8388608TiB", "is more than the largest 64-bit byte count"},
      {"nan", "not a finite number"},
      {"inf GB", "not a finite number"},
      {"+4GB", "does not start with a number"},
  };
  for (const auto& [text, what] : cases) {
    try {
      parse_bytes(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(Contains(e.what(), what));
    }
  }
  // The list of accepted forms comes with an unknown unit.
  try {
    parse_bytes("4 GiG");
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "B, KB, MB, GB, TB count in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024"));
  }
}

TEST(ParseBudget, PercentagesOfTheReference) {
  EXPECT_EQ(parse_budget("60%", 1000), 600);
  EXPECT_EQ(parse_budget("100%", 12345), 12345);
  EXPECT_EQ(parse_budget("1000%", 12345), 123450);
  EXPECT_EQ(parse_budget("33.3%", 1000), 333);
  EXPECT_EQ(parse_budget("0.5%", 1000), 5);
  EXPECT_EQ(parse_budget(" 60 % ", 1000), 600);
  EXPECT_EQ(parse_budget("50%", 15 * kGiB), 7 * kGiB + kGiB / 2);
  EXPECT_EQ(parse_budget("4GiB", 1000), 4 * kGiB);  // bytes ignore the reference
  EXPECT_EQ(parse_budget("3.5GB", 0), 3500000000);
}

TEST(ParseBudget, RejectedForms) {
  const std::tuple<const char*, int64_t, const char*> cases[] = {
      {"0%", 1000, "'0%' is out of range; a percentage budget is above 0% and at most 1000%"},
      {"-5%", 1000, "is negative"},
      {"1001%", 1000, "'1001%' is out of range"},
      {"%", 1000, "empty"},
      {"60%%", 1000, "'60%%' is not a percentage"},
      {"abc%", 1000, "does not start with a number"},
      {"60%", 0, "'60%' is a percentage of 0 bytes; give the budget in bytes instead"},
      {"0.01%", 1000, "less than one byte"},
      {"1000%", kInt64Max, "more than the largest 64-bit byte count"},
      {"0", 1000, "'0' is not a positive budget"},
      {"4 GiG", 1000, "unknown unit 'GiG'; write a byte count such as"},
      {"4 GiG", 1000, "; or a percentage such as 60%"},
  };
  for (const auto& [text, reference, what] : cases) {
    try {
      parse_budget(text, reference);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(Contains(e.what(), what));
    }
  }
}

TEST(ParseBandwidth, AcceptedForms) {
  const std::pair<const char*, double> cases[] = {
      {"16GB/s", 16e9},
      {"16 GB/s", 16e9},
      {"16gb/s", 16e9},
      {"12.5GiB/s", 12.5 * 1073741824.0},
      {"1e10", 1e10},
      {"100 MB/s", 1e8},
      {"512KiB/s", 524288},
      {"1B/s", 1},
      {"16GB", 16e9},  // "/s" may be left out
  };
  for (const auto& [text, bytes_per_s] : cases) EXPECT_EQ(parse_bandwidth(text), bytes_per_s) << "'" << text << "'";
}

TEST(ParseBandwidth, RejectedForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"0", "'0' is not a positive finite bandwidth; write bytes per second such as 16GB/s, 12.5GiB/s or 1e10"},
      {"0GB/s", "not a positive finite bandwidth"},
      {"-1GB/s", "is negative"},
      {"16GB/h", "unknown unit 'GB/h'"},
      {"16/s", "unknown unit '/s'"},
      {"fast", "does not start with a number"},
      {"", "empty"},
      {"1e400", "out of range"},
  };
  for (const auto& [text, what] : cases) {
    try {
      parse_bandwidth(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(Contains(e.what(), what));
    }
  }
}

TEST(FormatBytes, HumanUnits) {
  const std::pair<int64_t, const char*> cases[] = {
      {0, "0 B"},
      {17, "17 B"},
      {1023, "1023 B"},
      {1024, "1.00 KiB"},
      {1536, "1.50 KiB"},
      {10 * 1024, "10.0 KiB"},
      {512 * 1024, "512.0 KiB"},
      {(int64_t{1} << 20) - 1, "1.00 MiB"},  // 1023.999 KiB carries into MiB
      {3 * kGiB / 2, "1.50 GiB"},
      {4000000000, "3.73 GiB"},
      {int64_t{5} << 40, "5.00 TiB"},
      {kInt64Max, "8.00 EiB"},
      {-2048, "-2.00 KiB"},
      {-5, "-5 B"},
  };
  for (const auto& [bytes, text] : cases) EXPECT_EQ(format_bytes(bytes), text) << bytes;
}

TEST(FormatBandwidth, PowersOfAThousandAndTheyParseBack) {
  const std::pair<double, const char*> cases[] = {
      {512, "512 B/s"}, {50e9, "50.0 GB/s"}, {48.34e6, "48.3 MB/s"}, {999.99e6, "1.0 GB/s"}, {2.5e12, "2.5 TB/s"},
  };
  for (const auto& [rate, text] : cases) {
    EXPECT_EQ(format_bandwidth(rate), text) << rate;
    // What is printed reads back as the same rate to the printed precision.
    EXPECT_NEAR(parse_bandwidth(text), rate, rate * 0.01) << text;
  }
}

}  // namespace
}  // namespace memopt::solver

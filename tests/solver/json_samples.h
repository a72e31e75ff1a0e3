// json_samples.h: what the tests of the file formats share -- a profile and a schedule
// that exercise every field, an exact comparison of profiles, and the check that a
// reader refuses a document with the message the formats promise.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "solver/io/format_error.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "tests/solver/contains.h"

namespace memopt::solver::testing {

// Three stages with awkward doubles (they must survive the text round trip bit for
// bit) and every size different, so that a field read into the wrong member shows.
Profile sample_profile(bool with_link);
// Every op kind of the table, in an order that is valid for the format only.
Schedule sample_schedule();

// Equal field for field; doubles exactly, since the writer prints the shortest text
// that reads back as the same double.
void ExpectSameProfile(const Profile& a, const Profile& b);

// `read(j, source)` must throw FormatError "<source>: <path>: ...<what>...; ...<fix>".
template <class Read>
::testing::AssertionResult Rejected(Read read, const std::string& source, const nlohmann::ordered_json& j,
                                    const std::string& path, const std::string& what, const std::string& fix) {
  try {
    read(j, source);
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    const std::string start = source + ": " + path + ": ";
    if (!msg.starts_with(start))
      return ::testing::AssertionFailure() << "\"" << msg << "\"\n  does not start with \"" << start << "\"";
    if (auto r = Contains(msg, what); !r) return r;
    if (auto r = Contains(msg, "; "); !r) return r;
    return Contains(msg, fix);
  }
  return ::testing::AssertionFailure() << "accepted " << j.dump();
}

}  // namespace memopt::solver::testing

// json_samples.h: what the tests of the file formats share -- a profile and a schedule
// that exercise every field, and an exact comparison of profiles.
#pragma once

#include "solver/profile_json.h"
#include "solver/schedule.h"

namespace memopt::solver::testing {

// Three stages with awkward doubles (they must survive the text round trip bit for
// bit) and every size different, so that a field read into the wrong member shows.
Profile sample_profile(bool with_link);
// Every op kind of the table, in an order that is valid for the format only.
Schedule sample_schedule();

// Equal field for field; doubles exactly, since the writer prints the shortest text
// that reads back as the same double.
void ExpectSameProfile(const Profile& a, const Profile& b);

}  // namespace memopt::solver::testing

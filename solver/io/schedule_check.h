// schedule_check.h: a schedule read from one file checked against the chain of a
// profile read from another, with errors that name the schedule file and the op.
#pragma once

#include <string>

#include "solver/chain/chain.h"
#include "solver/io/format_error.h"
#include "solver/chain/schedule.h"
#include "solver/chain/simulate.h"

namespace memopt::solver {

// The same chain_length, and every op valid in turn (simulate_timeline). Throws
// FormatError naming `schedule_path`, /chain_length or /ops/<index>, what is wrong
// and the fix; otherwise returns the simulation, so callers need not repeat it.
SimResult check_schedule_for_chain(const Schedule& schedule, const Chain& chain, const std::string& schedule_path,
                                   const std::string& profile_path);

}  // namespace memopt::solver

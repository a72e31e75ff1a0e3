// schedule_check.cpp: the simulator's verdict as a FormatError on the schedule file.
#include "solver/io/schedule_check.h"

namespace memopt::solver {

SimResult check_schedule_for_chain(const Schedule& schedule, const Chain& chain, const std::string& schedule_path,
                                   const std::string& profile_path) {
  const std::string regenerate =
      "regenerate it with `memopt solve --profile " + profile_path + " --budget B --out " + schedule_path + "`";
  if (schedule.chain_length != chain.length())
    throw FormatError(schedule_path + ": /chain_length: the schedule is for " + std::to_string(schedule.chain_length) +
                      " stages but " + profile_path + " has " + std::to_string(chain.length()) +
                      "; it was made for another model or granularity: " + regenerate);
  SimResult r = simulate_timeline(chain, schedule.ops);
  if (!r.valid) {
    // error_op == ops.size() means the schedule ended in a bad state (incomplete backward).
    const std::string where = r.error_op >= 0 && r.error_op < static_cast<int>(schedule.ops.size())
                                  ? "/ops/" + std::to_string(r.error_op)
                                  : "/ops";
    throw FormatError(schedule_path + ": " + where + ": " + r.error + "; fix that op or " + regenerate);
  }
  return r;
}

}  // namespace memopt::solver

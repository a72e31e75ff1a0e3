// summary.h: what a schedule does to each stage (kept, checkpointed, recomputed n
// times, offloaded), for tables and reports.
#pragma once

#include <string>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

struct StageActivity {
  int num_forwards = 0;   // every fwd_* op on the stage; 1 means never recomputed
  int num_keeps = 0;      // fwd_keep ops: the stage's saved state was stored
  int num_ckpts = 0;      // fwd_ckpt ops: the stage's input a_i was kept as a checkpoint
  bool input_offloaded = false;  // a_i went to the host
  bool saved_offloaded = false;  // the saved state of its fwd_keep (ā_{i+1} beyond a_{i+1}) went to the host
  int num_recomputes() const { return num_forwards > 0 ? num_forwards - 1 : 0; }
};

std::vector<StageActivity> stage_activity(const Chain& chain, const std::vector<Op>& ops);

// "kept", "checkpointed", "checkpointed, recomputed 2x", "recomputed 1x", with
// ", input offloaded" or ", saved state offloaded" appended when it applies.
std::string describe(const StageActivity& a);

}  // namespace memopt::solver

// hand_plans.h: plans written by hand that make every kind of copy run, whatever the
// solvers would choose on this machine's timings -- shared by the CPU and CUDA
// executor tests.
#pragma once

#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/plan_edits.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime::testing {

// Every stage kept; each saved state beyond its output (but the last stage's) moved to
// the host right after its forward and back just before its backward, with `inputs`
// each stage's own input bytes too (offload_input), and with `carries` each input's
// ending carry (offload_carried). `moved[k]`: ā_k moves.
inline std::vector<solver::Op> keep_and_move_every_saved_state(const solver::Chain& chain, std::vector<bool>& moved,
                                                               bool inputs = false, bool carries = false) {
  const int L = chain.length();
  std::vector<solver::Op> ops;
  moved.assign(L + 1, false);
  for (int i = 0; i < L; ++i) {
    ops.push_back({solver::OpKind::FwdKeep, i});
    if (inputs && chain.own_bytes(i) > 0) ops.push_back({solver::OpKind::OffloadInput, i});
    if (carries && chain.ending_carried_bytes(i) > 0) ops.push_back({solver::OpKind::OffloadCarried, i});
    if (i + 1 < L && chain.xbar(i + 1) > chain.x(i + 1)) {
      ops.push_back({solver::OpKind::OffloadSaved, i + 1});
      moved[i + 1] = true;
    }
  }
  ops.push_back({solver::OpKind::Loss, -1});
  for (int i = L - 1; i >= 0; --i) {
    if (moved[i + 1]) ops.push_back({solver::OpKind::PrefetchSaved, i + 1});
    if (carries && chain.ending_carried_bytes(i) > 0) ops.push_back({solver::OpKind::PrefetchCarried, i});
    if (inputs && chain.own_bytes(i) > 0) ops.push_back({solver::OpKind::PrefetchInput, i});
    ops.push_back({solver::OpKind::Bwd, i});
  }
  return ops;
}

// `ops` with a wait_offloads after every offload.
inline std::vector<solver::Op> with_waits(const std::vector<solver::Op>& ops) {
  std::vector<solver::Op> out;
  for (const solver::Op& op : ops) {
    out.push_back(op);
    if (solver::is_offload(op.kind)) out.push_back({solver::OpKind::WaitOffloads, -1});
  }
  return out;
}

}  // namespace memopt::runtime::testing

// summary.cpp: per-stage activity of a schedule.
#include "solver/chain/summary.h"

namespace memopt::solver {

std::vector<StageActivity> stage_activity(const Chain& chain, const std::vector<Op>& ops) {
  std::vector<StageActivity> out(chain.length());
  for (const Op& op : ops) {
    if (op.kind == OpKind::OffloadSaved) {
      if (op.index >= 1 && op.index <= chain.length()) out[op.index - 1].saved_offloaded = true;
      continue;
    }
    if (op.index < 0 || op.index >= chain.length()) continue;
    StageActivity& a = out[op.index];
    switch (op.kind) {
      case OpKind::FwdKeep: ++a.num_forwards; ++a.num_keeps; break;
      case OpKind::FwdCkpt: ++a.num_forwards; ++a.num_ckpts; break;
      case OpKind::FwdDrop: ++a.num_forwards; break;
      case OpKind::Offload:
      case OpKind::OffloadInput:
      case OpKind::OffloadCarried: a.input_offloaded = true; break;
      case OpKind::Loss:
      case OpKind::Bwd:
      case OpKind::Prefetch:
      case OpKind::OffloadSaved:  // counted above
      case OpKind::PrefetchSaved:
      case OpKind::PrefetchInput:
      case OpKind::PrefetchCarried:
      case OpKind::WaitOffloads: break;
    }
  }
  return out;
}

std::string describe(const StageActivity& a) {
  std::string s;
  if (a.num_forwards == 1 && a.num_keeps == 1) s = "kept";
  else if (a.num_ckpts > 0) s = "checkpointed";
  if (a.num_recomputes() > 0)
    s += (s.empty() ? "" : ", ") + std::string("recomputed ") + std::to_string(a.num_recomputes()) + "x";
  if (s.empty()) s = "not run";
  if (a.input_offloaded) s += ", input offloaded";
  if (a.saved_offloaded) s += ", saved state offloaded";
  return s;
}

}  // namespace memopt::solver

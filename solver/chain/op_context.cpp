// op_context.cpp: Note [Where an op runs].
#include "solver/chain/op_context.h"

#include <algorithm>

namespace memopt::solver {

std::string_view context_word(OpContext context) { return kOpContexts[static_cast<size_t>(context)].word; }

void ContextTracker::reset(int stages) {
  after_loss_ = false;
  last_keep_ = -1;
  recomputed_.assign(static_cast<size_t>(std::max(stages, 0)), 0);
}

OpContext ContextTracker::next(const Op& op) {
  const bool in_chain = op.index >= 0 && static_cast<size_t>(op.index) < recomputed_.size();
  const int last_keep = last_keep_;
  if (info(op.kind).is_compute) last_keep_ = op.kind == OpKind::FwdKeep ? op.index : -1;
  switch (op.kind) {
    case OpKind::FwdKeep:
      if (in_chain) recomputed_[static_cast<size_t>(op.index)] = after_loss_;
      return after_loss_ ? OpContext::RecomputeKeep : OpContext::ForwardKeep;
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop:
      return after_loss_ ? OpContext::RecomputeNoGrad : OpContext::ForwardNoGrad;
    case OpKind::Loss:
      after_loss_ = true;
      return OpContext::Loss;
    case OpKind::Bwd:
      if (last_keep == op.index) return OpContext::BwdAfterItsKeep;
      return in_chain && recomputed_[static_cast<size_t>(op.index)] ? OpContext::BwdOfRecomputed : OpContext::BwdOfKept;
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::OffloadInput:
    case OpKind::PrefetchInput:
    case OpKind::OffloadCarried:
    case OpKind::PrefetchCarried:
    case OpKind::WaitOffloads:
      return OpContext::NotCompute;
  }
  return OpContext::NotCompute;
}

std::vector<OpContext> op_contexts(const std::vector<Op>& ops) {
  int stages = 0;
  for (const Op& op : ops) stages = std::max(stages, op.index + 1);
  ContextTracker tracker;
  tracker.reset(stages);
  std::vector<OpContext> out;
  out.reserve(ops.size());
  for (const Op& op : ops) out.push_back(tracker.next(op));
  return out;
}

}  // namespace memopt::solver

// op_context.cpp: Note [Where an op runs].
#include "solver/chain/op_context.h"

#include <algorithm>

namespace memopt::solver {

std::string_view context_word(OpContext context) { return kOpContexts[static_cast<size_t>(context)].word; }

std::vector<OpContext> op_contexts(const std::vector<Op>& ops) {
  std::vector<OpContext> out;
  out.reserve(ops.size());
  int max_stage = 0;
  for (const Op& op : ops) max_stage = std::max(max_stage, op.index + 1);
  // Per stage: did its latest fwd_keep run after the loss?
  std::vector<char> recomputed(static_cast<size_t>(max_stage), 0);
  bool after_loss = false;
  BackToBack back_to_back;
  for (const Op& op : ops) {
    const bool pair = info(op.kind).is_compute && back_to_back.next(op);
    switch (op.kind) {
      case OpKind::FwdKeep:
        recomputed[op.index] = after_loss;
        out.push_back(after_loss ? OpContext::RecomputeKeep : OpContext::ForwardKeep);
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        out.push_back(after_loss ? OpContext::RecomputeNoGrad : OpContext::ForwardNoGrad);
        break;
      case OpKind::Loss:
        after_loss = true;
        out.push_back(OpContext::Loss);
        break;
      case OpKind::Bwd:
        out.push_back(pair                   ? OpContext::BwdAfterItsKeep
                      : recomputed[op.index] ? OpContext::BwdOfRecomputed
                                             : OpContext::BwdOfKept);
        break;
      case OpKind::Offload:
      case OpKind::Prefetch:
      case OpKind::OffloadSaved:
      case OpKind::PrefetchSaved:
      case OpKind::OffloadInput:
      case OpKind::PrefetchInput:
      case OpKind::OffloadCarried:
      case OpKind::PrefetchCarried:
      case OpKind::WaitOffloads:
        out.push_back(OpContext::NotCompute);
        break;
    }
  }
  return out;
}

}  // namespace memopt::solver

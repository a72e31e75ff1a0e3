// op_context.h: where in a step each compute op of a schedule runs -- in the forward
// or after the loss, and, for a backward, whether its stage was recomputed -- so that
// measured and predicted op times can be compared context by context (`memopt run
// --op-times`). Plain schedule data, no clocks.
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>
#include <vector>

#include "solver/chain/schedule.h"

namespace memopt::solver {

// Note [Where an op runs]
// The chain model gives each stage one time per kind of op: fwd_keep, the no-grad
// forward, bwd. The profile measures them in store-all's order (Note [Stage times
// from training steps] in runtime/stage_timing.h): every forward in the forward, every
// backward long after its own forward. A plan that recomputes runs the same ops
// elsewhere: after the loss, a re-forward right before the backward that needs it,
// with the caches holding what the backward just touched rather than the whole
// forward's activations. Splitting the measured time by these contexts shows whether
// an op costs the same wherever it runs, which is what the chain model assumes -- but
// for one context, a bwd right after its own fwd_keep, which a stage may price apart
// (Note [A stage run back to back] in chain.h).
enum class OpContext {
  ForwardKeep,       // fwd_keep before the loss
  ForwardNoGrad,     // fwd_ckpt / fwd_drop before the loss
  Loss,
  RecomputeKeep,     // fwd_keep after the loss: a recomputation
  RecomputeNoGrad,   // fwd_ckpt / fwd_drop after the loss
  BwdOfKept,         // bwd of a stage whose last fwd_keep ran before the loss
  BwdOfRecomputed,   // bwd of a stage whose last fwd_keep ran after the loss, with compute ops between
  BwdAfterItsKeep,   // bwd i right after fwd_keep i, no compute op between (Note [A stage run back to back])
  NotCompute,        // a copy or wait_offloads
};

struct OpContextInfo {
  OpContext context;
  std::string_view word;  // in printed tables and JSON
};

// In OpContext's order: a context's value is its row's index.
inline constexpr OpContextInfo kOpContexts[] = {
    {OpContext::ForwardKeep, "forward fwd_keep"},
    {OpContext::ForwardNoGrad, "forward no-grad"},
    {OpContext::Loss, "loss"},
    {OpContext::RecomputeKeep, "recompute fwd_keep"},
    {OpContext::RecomputeNoGrad, "recompute no-grad"},
    {OpContext::BwdOfKept, "bwd of a kept stage"},
    {OpContext::BwdOfRecomputed, "bwd of a recomputed stage"},
    {OpContext::BwdAfterItsKeep, "bwd right after its fwd_keep"},
    {OpContext::NotCompute, "copy or wait"},
};

static_assert([] {
  for (size_t i = 0; i < std::size(kOpContexts); ++i)
    if (static_cast<size_t>(kOpContexts[i].context) != i) return false;
  return true;
}());

std::string_view context_word(OpContext context);

// Follows a schedule op by op and tells which ops are a bwd right after its own
// fwd_keep: the one context the chain model prices apart (Note [A stage run back to
// back] in chain.h). One int of state, so that the simulators, which follow every plan
// they run and copy their state to resume from a prefix, pay next to nothing for it.
class BackToBack {
 public:
  // Whether `op`, the next compute op of the schedule, is `bwd i` right after `fwd_keep
  // i`; then records it. Copies and waits between them do not count: callers pass only
  // compute ops.
  bool next(const Op& op) {
    const bool pair = op.kind == OpKind::Bwd && last_keep_ == op.index;
    last_keep_ = op.kind == OpKind::FwdKeep ? op.index : -1;
    return pair;
  }
  friend bool operator==(const BackToBack&, const BackToBack&) = default;

 private:
  int last_keep_ = -1;  // the stage of the last compute op when it was a fwd_keep, else -1
};

// One context per op, in the schedule's order. A schedule without a loss op has no
// "after the loss": every op is then in the forward.
std::vector<OpContext> op_contexts(const std::vector<Op>& ops);

}  // namespace memopt::solver

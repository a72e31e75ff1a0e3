// plan_edits.h: the edits of a plan's op list that the local searches try (polish.h,
// kicks.h); each returns a new list and leaves validity to the simulator.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// The op at `from` taken out and put back at position `to` of the shorter list.
inline std::vector<Op> moved(std::vector<Op> ops, size_t from, size_t to) {
  const Op op = ops[from];
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(to), op);
  return ops;
}

inline std::vector<Op> inserted(std::vector<Op> ops, size_t at, Op op) {
  ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at), op);
  return ops;
}

inline std::vector<Op> erased(std::vector<Op> ops, size_t at) {
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(at));
  return ops;
}

// The wait_offloads at `at` taken out, or the offload at `at` with the prefetch that
// brings its data back (if any); any other op is left in.
inline std::vector<Op> dropped(std::vector<Op> ops, size_t at) {
  const Op op = ops[at];
  if (is_offload(op.kind)) {
    const auto back = std::find(ops.begin() + static_cast<std::ptrdiff_t>(at) + 1, ops.end(), Op{way_back(op.kind), op.index});
    if (back != ops.end()) ops.erase(back);
  } else if (op.kind != OpKind::WaitOffloads) {
    return ops;
  }
  return erased(std::move(ops), at);
}

// A round trip a plan could add: `out` (an is_offload kind) after position
// `made`, its data back before position `reader`.
struct RoundTrip {
  size_t made = 0, reader = 0;
  Op out{OpKind::Offload, -1};
};
// ā_{k+1}'s, if it holds bytes beyond a_{k+1} and does not move yet: made by the last
// fwd_keep k before bwd k, read by bwd k.
std::optional<RoundTrip> saved_state_round_trip(const Chain& chain, const std::vector<Op>& ops, int k);
// a_k's, if it holds bytes, shares no carried bytes and does not move yet: one per
// pair of consecutive ops that read it, in plan order.
std::vector<RoundTrip> activation_round_trips(const Chain& chain, const std::vector<Op>& ops, int k);

}  // namespace memopt::solver

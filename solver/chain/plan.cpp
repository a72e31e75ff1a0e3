// plan.cpp: turns per-subchain decisions into the ops of a persistent schedule.
#include "solver/chain/plan.h"

#include <stdexcept>
#include <string>

namespace memopt::solver {
namespace {

struct Emitter {
  const Chain& chain;
  const Decide& decide;
  const KeepUnits& keep_units;
  const CheckpointUnits& checkpoint_units;
  std::vector<Op>& ops;

  int64_t keep_taken(int s) const { return keep_units ? keep_units(s) : 0; }
  int64_t checkpoint_taken(int s, int j) const { return checkpoint_units ? checkpoint_units(s, j) : 0; }

  void emit(int s, int t, int64_t m) {
    const int L = chain.length();
    // Keep-branches nest along the chain; iterate over them instead of recursing so
    // that long chains do not need deep stacks.
    std::vector<int> kept;
    while (s < t) {
      const Decision d = decide(s, t, m);
      if (d.keep) {
        ops.push_back({OpKind::FwdKeep, s});
        kept.push_back(s);
        m -= keep_taken(s);
        ++s;
        continue;
      }
      const int j = d.checkpoint_at;
      if (j <= s || j > t)
        throw std::logic_error("plan: checkpoint position " + std::to_string(j) + " outside (" +
                               std::to_string(s) + ", " + std::to_string(t) + "]");
      ops.push_back({OpKind::FwdCkpt, s});
      for (int k = s + 1; k < j; ++k) ops.push_back({OpKind::FwdDrop, k});
      emit(j, t, m - checkpoint_taken(s, j));
      // What remains is (s, j-1) with the same m; loop on it.
      t = j - 1;
    }
    if (s == L) {
      ops.push_back({OpKind::Loss, -1});
    } else {
      ops.push_back({OpKind::FwdKeep, s});
      ops.push_back({OpKind::Bwd, s});
    }
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) ops.push_back({OpKind::Bwd, *it});
  }
};

}  // namespace

std::vector<Op> emit_persistent(const Chain& chain, const Decide& decide, int64_t m0,
                                const KeepUnits& keep_units, const CheckpointUnits& checkpoint_units) {
  std::vector<Op> ops;
  emit_persistent_range(chain, 0, chain.length(), decide, m0, keep_units, checkpoint_units, ops);
  return ops;
}

void emit_persistent_range(const Chain& chain, int s, int t, const Decide& decide, int64_t m0,
                           const KeepUnits& keep_units, const CheckpointUnits& checkpoint_units,
                           std::vector<Op>& ops) {
  Emitter e{chain, decide, keep_units, checkpoint_units, ops};
  e.emit(s, t, m0);
}

}  // namespace memopt::solver

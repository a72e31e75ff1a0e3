// plan.h: persistent schedules -- those built by the recursion of docs/formats.md, "The recompute DP" --
// written as a decision per subchain (keep s, or checkpoint and restart at j), and
// turned into ops. The DP, the baselines and the brute force all emit through here.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// For subchain (s, t) with s < t: keep = `fwd_keep s`, solve (s+1, t), `bwd s`;
// otherwise checkpoint_at = j in (s, t]: `fwd_ckpt s`, `fwd_drop s+1..j-1`,
// solve (j, t), solve (s, j-1). For s == t the subchain is a base case and the
// decision is not asked.
struct Decision {
  bool keep = true;
  int checkpoint_at = -1;
};

// m is the DP's memory argument in whatever units the caller uses, passed down the
// recursion as docs/formats.md, "The recompute DP" does (keep: m - x̄_{s+1}; checkpoint: m - x_j for (j, t),
// m for (s, j-1), each less what it shares with a_s: Note [Carried bytes] in
// chain.h); callers that do not need it ignore it.
using Decide = std::function<Decision(int s, int t, int64_t m)>;

// keep_units(s) is what the keep branch at s takes from m for (s+1, t), and
// checkpoint_units(s, j) what the checkpoint at j takes for (j, t), in the caller's
// units, used only to pass m down; emit_persistent(chain, decide) with neither passes
// m = 0.
using KeepUnits = std::function<int64_t(int s)>;
using CheckpointUnits = std::function<int64_t(int s, int j)>;
std::vector<Op> emit_persistent(const Chain& chain, const Decide& decide, int64_t m0 = 0,
                                const KeepUnits& keep_units = nullptr,
                                const CheckpointUnits& checkpoint_units = nullptr);

// The same for the subchain (s, t) alone, appended to `ops`: forward s..t and
// backward t..s, starting from a_s and d_{t+1} (the loss when t == L).
void emit_persistent_range(const Chain& chain, int s, int t, const Decide& decide, int64_t m0,
                           const KeepUnits& keep_units, const CheckpointUnits& checkpoint_units,
                           std::vector<Op>& ops);

}  // namespace memopt::solver

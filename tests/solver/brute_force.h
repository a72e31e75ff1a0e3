// brute_force.h: an exhaustive enumerator of persistent schedules (docs/formats.md, "The recompute DP"'s
// schedule class), written independently of solver/chain/plan.h, and the brute-force
// optimum over it -- the plain reference the DP is compared with.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::solver::testing {

// Every persistent schedule of a chain of L stages (they depend on L only), each
// exactly once, from the recursion
//   sub(s, s), s < L:  [fwd_keep s, bwd s]
//   sub(L, L):         [loss]
//   sub(s, t), s < t:  [fwd_keep s] + sub(s+1, t) + [bwd s]
//                      or, for j in (s, t]: [fwd_ckpt s, fwd_drop s+1..j-1] + sub(j, t) + sub(s, j-1)
std::vector<std::vector<Op>> all_persistent_schedules(int L);
// The same for the subchain s..t of a chain of L stages (t = L includes the loss).
std::vector<std::vector<Op>> persistent_schedules_of(int L, int s, int t);

// The number of schedules that recursion yields for L stages, by a separate count:
// with n = t - s + 1, N(1) = 1 and N(n) = N(n-1) + Σ_{k=1}^{n-1} N(n-k)·N(k). These are
// the large Schröder numbers 1, 2, 6, 22, 90, 394, ... (N(L+1) for L stages).
int64_t num_persistent_schedules(int L);

// One persistent schedule drawn by the same recursion, each branch equally likely.
std::vector<Op> random_persistent_schedule(int L, std::mt19937_64& rng);

// A schedule simulated once: its peak and time do not depend on the budget.
struct Evaluated {
  int64_t peak_bytes = 0;
  double time_ms = 0;
  size_t index = 0;  // into the schedule list
};

// Simulates every schedule with simulate_sequential; every one must be valid (the
// enumerator only builds valid schedules), otherwise this throws.
std::vector<Evaluated> evaluate_all(const Chain& chain, const std::vector<std::vector<Op>>& schedules);

// The fastest schedule with peak <= budget_bytes (the first such in list order on
// ties), or nullopt when none fits.
std::optional<Evaluated> fastest_fitting(const std::vector<Evaluated>& evaluated, int64_t budget_bytes);

}  // namespace memopt::solver::testing

// baselines.h: the simple strategies of docs/formats.md, "Baselines and the solver front door",
// first-class solvers with the
// same signature as the DP so every report compares like with like.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/dp_options.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// Each returns its ops, or nullopt when they do not fit budget_bytes (simulated).
std::optional<std::vector<Op>> store_all(const Chain&, int64_t budget_bytes, const DpOptions& = {});
std::optional<std::vector<Op>> recompute_blocks(const Chain&, int64_t budget_bytes, const DpOptions& = {});
std::optional<std::vector<Op>> sqrt_segments(const Chain&, int64_t budget_bytes, const DpOptions& = {});
std::optional<std::vector<Op>> recompute_all(const Chain&, int64_t budget_bytes, const DpOptions& = {});
// Megatron-LM's selective recomputation (Korthikanti et al. 2022): recompute every
// stage whose role is attention_core, keep the rest. Pointwise (PyTorch's selective
// checkpointing of elementwise ops): recompute every pointwise stage, keep the rest.
// A run of consecutive stages of the role is recomputed together from its input.
// Both nullopt, whatever the budget, when no stage has the role.
std::optional<std::vector<Op>> selective(const Chain&, int64_t budget_bytes, const DpOptions& = {});
std::optional<std::vector<Op>> pointwise(const Chain&, int64_t budget_bytes, const DpOptions& = {});

// The ops of each strategy regardless of any budget.
std::vector<Op> store_all_ops(const Chain&);
// The peak of keeping every activation, simulated (docs/formats.md, "Operations and memory without
// offload: the sequential simulator"): the
// 100% of a budget written as a percentage.
int64_t store_all_peak_bytes(const Chain& chain);
std::vector<Op> recompute_blocks_ops(const Chain&);
std::vector<Op> sqrt_ops(const Chain&);
std::vector<Op> recompute_all_ops(const Chain&);
std::optional<std::vector<Op>> selective_ops(const Chain&);  // nullopt: no attention_core stage
std::optional<std::vector<Op>> pointwise_ops(const Chain&);  // nullopt: no pointwise stage

}  // namespace memopt::solver

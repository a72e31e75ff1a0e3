// baselines.cpp: store_all, recompute_blocks, sqrt, recompute_all, selective and
// pointwise as decisions
// over the same persistent recursion the DP uses, so they emit ops the same way.
#include "solver/dp/baselines.h"

#include <algorithm>
#include <cmath>

#include "solver/chain/plan.h"
#include "solver/chain/simulate.h"

namespace memopt::solver {
namespace {

std::optional<std::vector<Op>> if_fits(const Chain& chain, std::vector<Op> ops, int64_t budget_bytes) {
  if (!fits(simulate_sequential(chain, ops), budget_bytes)) return std::nullopt;
  return ops;
}

// Checkpoints the inputs of the segments that start at multiples of `segment`,
// keeps everything inside a segment. segment = 1 is recompute_blocks, segment >= L
// is store_all.
std::vector<Op> segmented_ops(const Chain& chain, int segment) {
  const int L = chain.length();
  return emit_persistent(chain, [&](int s, int t, int64_t) -> Decision {
    const int next = (s / segment + 1) * segment;
    // Only the spine (t == L) is cut; the last stage is never checkpointed since the
    // loss follows it immediately and recomputing it would buy nothing.
    if (t == L && next < L) return {false, next};
    return {true, -1};
  });
}

// Keeps every stage but those of `role`; each run of consecutive stages of that role
// is recomputed once, right before its backward, from the run's input, which the kept
// stage before it holds (an attention core cut in two is recomputed whole).
std::optional<std::vector<Op>> recompute_role_ops(const Chain& chain, StageRole role) {
  if (!chain.has_role(role)) return std::nullopt;
  const int L = chain.length();
  auto has_role = [&](int i) { return i >= 0 && i < L && chain.stages[static_cast<size_t>(i)].role == role; };
  return emit_persistent(chain, [&](int s, int t, int64_t) -> Decision {
    if (!has_role(s) || has_role(s - 1)) return {true, -1};
    int end = s + 1;
    while (has_role(end)) ++end;
    // Inside the run's own recomputation (t < end) everything is kept.
    if (end > t) return {true, -1};
    return {false, end};
  });
}

std::optional<std::vector<Op>> if_some_fits(const Chain& chain, std::optional<std::vector<Op>> ops, int64_t budget_bytes) {
  if (!ops) return std::nullopt;
  return if_fits(chain, std::move(*ops), budget_bytes);
}

}  // namespace

std::optional<std::vector<Op>> selective_ops(const Chain& chain) {
  return recompute_role_ops(chain, StageRole::AttentionCore);
}
std::optional<std::vector<Op>> pointwise_ops(const Chain& chain) {
  return recompute_role_ops(chain, StageRole::Pointwise);
}

int64_t store_all_peak_bytes(const Chain& chain) { return simulate_sequential(chain, store_all_ops(chain)).peak_bytes; }

std::vector<Op> store_all_ops(const Chain& chain) {
  return emit_persistent(chain, [](int, int, int64_t) { return Decision{true, -1}; });
}

std::vector<Op> recompute_blocks_ops(const Chain& chain) { return segmented_ops(chain, 1); }

std::vector<Op> sqrt_ops(const Chain& chain) {
  // Chen et al. (2016): about sqrt(L) segments of about sqrt(L) stages each.
  const int L = chain.length();
  const int segment = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(L)))));
  return segmented_ops(chain, segment);
}

std::vector<Op> recompute_all_ops(const Chain& chain) {
  // Keep only a_0 and the gradient: before each backward, recompute from a_0.
  return emit_persistent(chain, [](int s, int t, int64_t) { return Decision{false, t}; });
}

std::optional<std::vector<Op>> store_all(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_fits(c, store_all_ops(c), budget_bytes);
}
std::optional<std::vector<Op>> recompute_blocks(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_fits(c, recompute_blocks_ops(c), budget_bytes);
}
std::optional<std::vector<Op>> sqrt_segments(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_fits(c, sqrt_ops(c), budget_bytes);
}
std::optional<std::vector<Op>> recompute_all(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_fits(c, recompute_all_ops(c), budget_bytes);
}
std::optional<std::vector<Op>> selective(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_some_fits(c, selective_ops(c), budget_bytes);
}
std::optional<std::vector<Op>> pointwise(const Chain& c, int64_t budget_bytes, const DpOptions&) {
  return if_some_fits(c, pointwise_ops(c), budget_bytes);
}

}  // namespace memopt::solver

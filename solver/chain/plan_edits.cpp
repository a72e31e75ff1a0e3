// plan_edits.cpp: the round trips of plan_edits.h.
#include "solver/chain/plan_edits.h"

#include <iterator>

#include "solver/chain/simulate.h"

namespace memopt::solver {
namespace {

bool has(const std::vector<Op>& ops, Op op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

}  // namespace

std::optional<RoundTrip> saved_state_round_trip(const Chain& chain, const std::vector<Op>& ops, int k) {
  if (chain.hollow_bytes(k + 1) <= 0 || has(ops, {OpKind::OffloadSaved, k + 1})) return std::nullopt;
  const auto bwd = std::find(ops.begin(), ops.end(), Op{OpKind::Bwd, k});
  const auto keep = std::find(std::make_reverse_iterator(bwd), ops.rend(), Op{OpKind::FwdKeep, k});
  if (bwd == ops.end() || keep == ops.rend()) return std::nullopt;
  return RoundTrip{static_cast<size_t>(ops.rend() - keep) - 1, static_cast<size_t>(bwd - ops.begin()),
                   {OpKind::OffloadSaved, k + 1}};
}

std::vector<RoundTrip> activation_round_trips(const Chain& chain, const std::vector<Op>& ops, int k) {
  std::vector<RoundTrip> out;
  if (chain.x(k) <= 0 || !chain.stands_alone(k) || has(ops, {OpKind::Offload, k})) return out;
  std::optional<size_t> last_read;
  for (size_t p = 0; p < ops.size(); ++p) {
    if (!info(ops[p].kind).is_compute || compute_reads(chain, ops[p]) != k) continue;
    if (last_read) out.push_back({*last_read, p, {OpKind::Offload, k}});
    last_read = p;
  }
  return out;
}

}  // namespace memopt::solver

// coarsen.cpp: the chain of a chain's blocks, and block plans written out on its stages.
#include "solver/chain/coarsen.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "solver/chain/plan_edits.h"

namespace memopt::solver {

std::string_view block_of(std::string_view stage_name) {
  size_t start = 0;
  while (start < stage_name.size()) {
    const size_t dot = stage_name.find('.', start);
    if (dot == std::string_view::npos) return {};  // the last component: none before it
    const std::string_view part = stage_name.substr(start, dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return stage_name.substr(0, dot);
    start = dot + 1;
  }
  return {};
}

std::vector<std::string_view> stage_blocks(const Chain& chain) {
  const bool fields = std::any_of(chain.stages.begin(), chain.stages.end(), [](const Stage& s) { return !s.block.empty(); });
  std::vector<std::string_view> blocks;
  for (const Stage& s : chain.stages) blocks.push_back(fields ? std::string_view(s.block) : block_of(s.name));
  return blocks;
}

namespace {

// Activations on the device, each as (index k, bytes of a_k or ā_k), counted as the
// simulator counts them (Note [Carried bytes] in chain.h): each once, less the prefix
// it shares with the next one present (sharing only shrinks with distance, so the
// prefix shared with any further one is inside that one).
class Resident {
 public:
  explicit Resident(const Chain& chain) : chain_(chain) {}
  void add(int k, int64_t bytes) {
    items_.insert(std::lower_bound(items_.begin(), items_.end(), std::pair<int, int64_t>{k, 0}), {k, bytes});
  }
  void remove(int k) {
    std::erase_if(items_, [k](const auto& item) { return item.first == k; });
  }
  int64_t bytes() const {
    int64_t total = 0;
    for (size_t n = 0; n < items_.size(); ++n) {
      total += items_[n].second;
      if (n > 0) total -= chain_.shared(items_[n - 1].first, items_[n].first);
    }
    return total;
  }

 private:
  const Chain& chain_;
  std::vector<std::pair<int, int64_t>> items_;
};

// Stage `i .. j` of `fine` as one stage (Note [Plans made for the blocks]).
Stage merged_stage(const Chain& fine, int i, int j, std::string name) {
  Stage s;
  s.name = std::move(name);
  const int64_t carried = fine.shared(i, j + 1);  // what the block's output shares with its input
  bool nograd = false;
  double nograd_ms = 0;
  for (int k = i; k <= j; ++k) {
    s.fwd_ms += fine.uf(k);
    s.bwd_ms += fine.ub(k);
    nograd_ms += fine.uf_nograd(k);
    nograd = nograd || fine.stages[k].fwd_nograd_ms.has_value();
  }
  if (nograd) s.fwd_nograd_ms = nograd_ms;
  // The block run back to back runs its stages' forwards, then their backwards: only
  // its last stage runs back to back (Note [A stage run back to back]).
  if (fine.stages[j].fwd_bwd_pair_ms) s.fwd_bwd_pair_ms = s.fwd_ms + s.bwd_ms - fine.ub(j) + fine.ub_after_keep(j);
  s.out_bytes = fine.x(j + 1);
  s.carried_bytes = carried;

  // The forwards of every stage from the block's input alone, as `keep` (fwd_keep
  // each) or not (fwd_ckpt the first, fwd_drop the others): the highest the stages
  // reach, and `resident` left holding what they hold at the end.
  const auto forwards = [&](Resident& resident, bool keep) {
    resident.add(i, fine.x(i));
    int64_t peak = 0;
    for (int k = i; k <= j; ++k) {
      resident.add(k + 1, keep ? fine.xbar(k + 1) : fine.x(k + 1));
      peak = std::max(peak, resident.bytes() + (keep ? fine.ftmp_keep(k) : fine.ftmp(k)));
      if (!keep && k > i) resident.remove(k);
    }
    return peak;
  };
  Resident kept(fine);
  const int64_t keep_peak = forwards(kept, /*keep=*/true);
  const int64_t all_kept = kept.bytes();
  s.saved_bytes = std::max(all_kept - fine.x(i) + carried, s.out_bytes);
  s.fwd_keep_tmp_bytes = keep_peak - all_kept;
  Resident plain(fine);
  const int64_t plain_peak = forwards(plain, /*keep=*/false);
  s.fwd_tmp_bytes = plain_peak - plain.bytes();

  // bwd of every stage in reverse, from the kept state and the output's gradient.
  Resident grads(fine);
  grads.add(j + 1, fine.x(j + 1));
  const int64_t before = kept.bytes() + grads.bytes();
  int64_t bwd_peak = before;  // no op's is lower, and below it btmp would break validate()'s bound
  for (int k = j; k >= i; --k) {
    grads.add(k, fine.x(k));
    bwd_peak = std::max(bwd_peak, kept.bytes() + grads.bytes() + fine.btmp(k));
    grads.remove(k + 1);
    kept.remove(k + 1);
  }
  s.bwd_tmp_bytes = bwd_peak - before - (fine.x(i) - carried);
  return s;
}

}  // namespace

Coarsening coarsen(const Chain& fine, std::vector<int> first) {
  const int L = fine.length();
  if (first.size() < 2 || first.front() != 0 || first.back() != L || !std::is_sorted(first.begin(), first.end()) ||
      std::adjacent_find(first.begin(), first.end()) != first.end())
    throw std::invalid_argument("coarsen: the groups must start at 0, increase, and end at the chain's length");
  Coarsening c;
  c.chain.input_bytes = fine.input_bytes;
  c.chain.loss = fine.loss;
  c.chain.link = fine.link;
  const std::vector<std::string_view> blocks = stage_blocks(fine);
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    const int i = first[g], j = first[g + 1] - 1;
    if (i == j) c.chain.stages.push_back(fine.stages[i]);
    else c.chain.stages.push_back(merged_stage(fine, i, j, std::string(blocks[i])));
  }
  c.first = std::move(first);
  return c;
}

std::optional<Coarsening> coarsen_to_blocks(const Chain& fine) {
  const std::vector<std::string_view> blocks = stage_blocks(fine);
  std::vector<int> first{0};
  for (int k = 1; k < fine.length(); ++k)
    if (blocks[k].empty() || blocks[k] != blocks[k - 1]) first.push_back(k);
  if (static_cast<int>(first.size()) == fine.length()) return std::nullopt;  // no block of two
  first.push_back(fine.length());
  return coarsen(fine, std::move(first));
}

std::vector<Op> write_out(const Chain& fine, const Coarsening& coarse, const std::vector<Op>& coarse_ops) {
  const auto& first = coarse.first;
  // What a block's offload_input / offload_saved moves, as fine copies in issue order
  // (Note [Carried bytes may leave] in simulate.h). An ending carry that starts inside
  // the block goes with the saved state; one whose first holder is the block's input
  // goes with the input -- or with the saved state when the plan never moves the
  // input, for it may hold bytes that start inside the block too. One that starts
  // before the block stays, as on the chain of blocks.
  std::vector<char> input_moves_of(coarse.chain.length() + 1, 0);
  for (const Op& op : coarse_ops)
    if (op.kind == OpKind::OffloadInput && op.index >= 0 && op.index < coarse.chain.length()) input_moves_of[op.index] = 1;
  enum class Goes { WithInput, WithSaved, Stays };
  const auto ending_carry = [&](int g, int k) {
    if (fine.ending_carried_bytes(k) == 0) return Goes::Stays;
    const int holder = fine.first_holder_of_ending_carry(k);
    if (holder < first[g]) return Goes::Stays;  // always so for the block's input itself
    return holder == first[g] && input_moves_of[g] ? Goes::WithInput : Goes::WithSaved;
  };
  const auto input_moves = [&](int g) {
    std::vector<Op> out;
    if (fine.own_bytes(first[g]) > 0) out.push_back({OpKind::OffloadInput, first[g]});
    for (int k = first[g] + 1; k < first[g + 1]; ++k)
      if (ending_carry(g, k) == Goes::WithInput) out.push_back({OpKind::OffloadCarried, k});
    return out;
  };
  const auto saved_moves = [&](int g) {
    std::vector<Op> out;
    for (int k = first[g]; k < first[g + 1]; ++k) {
      if (k != first[g] && fine.own_bytes(k) > 0) out.push_back({OpKind::OffloadInput, k});
      if (ending_carry(g, k) == Goes::WithSaved) out.push_back({OpKind::OffloadCarried, k});
      if (fine.hollow_bytes(k + 1) > 0) out.push_back({OpKind::OffloadSaved, k + 1});
    }
    return out;
  };
  // Out in order, back in reverse.
  const auto emit = [](std::vector<Op>& ops, const std::vector<Op>& moves, bool out) {
    if (out) {
      ops.insert(ops.end(), moves.begin(), moves.end());
      return;
    }
    std::transform(moves.rbegin(), moves.rend(), std::back_inserter(ops), [](Op op) { return Op{way_back(op.kind), op.index}; });
  };
  std::vector<Op> ops;
  for (const Op& op : coarse_ops) {
    const int g = op.index;
    switch (op.kind) {
      case OpKind::FwdKeep:
      case OpKind::FwdDrop:
        for (int k = first[g]; k < first[g + 1]; ++k) ops.push_back({op.kind, k});
        break;
      case OpKind::FwdCkpt:
        ops.push_back({OpKind::FwdCkpt, first[g]});
        for (int k = first[g] + 1; k < first[g + 1]; ++k) ops.push_back({OpKind::FwdDrop, k});
        break;
      case OpKind::Bwd:
        for (int k = first[g + 1] - 1; k >= first[g]; --k) ops.push_back({OpKind::Bwd, k});
        break;
      case OpKind::Offload:
      case OpKind::Prefetch:
        ops.push_back({op.kind, first[g]});
        break;
      case OpKind::OffloadInput:
      case OpKind::PrefetchInput:
        emit(ops, input_moves(g), op.kind == OpKind::OffloadInput);
        break;
      case OpKind::OffloadSaved:
      case OpKind::PrefetchSaved:
        emit(ops, saved_moves(g - 1), op.kind == OpKind::OffloadSaved);
        break;
      case OpKind::OffloadCarried:
      case OpKind::PrefetchCarried:
        throw std::invalid_argument("write_out: " + to_string(op) + " in a plan for the chain of blocks: only the "
                                    "offload DP's copies are written out, and it makes none of these");
      case OpKind::Loss:
      case OpKind::WaitOffloads:
        ops.push_back(op);
        break;
    }
  }
  return ops;
}

}  // namespace memopt::solver

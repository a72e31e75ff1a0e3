// offload_brute_force.cpp: the exhaustive enumerator of offload_brute_force.h.
#include "tests/solver/offload_brute_force.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "solver/chain/simulate.h"
#include "tests/solver/brute_force.h"

namespace memopt::solver::testing {
namespace {

// One item of the forward sequence, as the class defines it.
struct Item {
  // KeepInput, KeepOffloadInput: Keep, KeepOffload that also move the own bytes of
  // their input, before the saved state.
  enum Kind { Keep, KeepOffload, Ckpt, KeepInput, KeepOffloadInput } kind;
  int start, end;      // stages start..end-1
  bool offload = false;
  // Its prefetch is issued when the backward of item `lead` places later starts
  // (0: when the next item's backward ends); beyond 1, every item up to that one
  // is a plain Keep; -1: when the next item, a Ckpt item whose persistent schedule
  // keeps every stage it re-runs, has re-run them and its first bwd starts.
  int lead = 0;
  // It starts with wait_offloads: the previous item's copy is still running then.
  bool wait = false;
  bool offloads() const { return kind != Keep && (kind != Ckpt || offload); }
  bool moves_input() const { return kind == KeepInput || kind == KeepOffloadInput; }
  bool moves_saved() const { return kind == KeepOffload || kind == KeepOffloadInput; }
};

class Builder {
 public:
  explicit Builder(const Chain& chain) : chain_(chain), L_(chain.length()) {}

  std::vector<OffloadCandidate> run() {
    for (int tail = 0; tail <= L_; ++tail) {
      tail_ = tail;
      items_.clear();
      compose(0);
    }
    return std::move(out_);
  }

 private:
  // Splits 0..tail_-1 into items, every way.
  void compose(int e) {
    if (e == tail_) { choose_leads(0); return; }
    // a_e is plain unless the previous item kept (part of) ā_e.
    const bool plain = items_.empty() || items_.back().kind == Item::Ckpt;
    items_.push_back({Item::Keep, e, e + 1});
    compose(e + 1);
    items_.pop_back();
    for (const Item::Kind kind : {Item::KeepOffload, Item::KeepInput, Item::KeepOffloadInput}) {
      const Item item{kind, e, e + 1};
      if (item.moves_saved() && chain_.xbar(e + 1) <= chain_.x(e + 1)) continue;
      if (item.moves_input() && chain_.own_bytes(e) <= 0) continue;
      items_.push_back(item);
      compose(e + 1);
      items_.pop_back();
    }
    for (int next = e + 1; next <= tail_; ++next) {
      for (const bool offload : {false, true}) {
        if (offload && (!plain || chain_.x(e) == 0 || chain_.carried(e) > 0 || chain_.carried(e + 1) > 0)) continue;
        items_.push_back({Item::Ckpt, e, next, offload});
        compose(next);
        items_.pop_back();
      }
    }
  }

  void choose_leads(size_t i) {
    if (i == items_.size()) { choose_waits(1); return; }
    choose_leads(i + 1);
    if (!items_[i].offloads()) return;
    for (size_t d = 1; i + d <= items_.size(); ++d) {
      if (d >= 2 && (i + d == items_.size() || items_[i + d - 1].kind != Item::Keep || items_[i + d].kind != Item::Keep))
        break;
      items_[i].lead = static_cast<int>(d);
      choose_leads(i + 1);
    }
    if (i + 1 < items_.size() && items_[i + 1].kind == Item::Ckpt) {
      items_[i].lead = -1;
      choose_leads(i + 1);
    }
    items_[i].lead = 0;
  }

  // Item k (the tail for k = items_.size()) waits or not for the copy of item k-1,
  // or of the item before a run of plain Keep items that ends at k (Note [A copy
  // through a kept run]), every way; a wait is only tried where that copy is still
  // running.
  void choose_waits(size_t k) {
    if (k > items_.size()) { if (windows_ok()) choose_inner(0, {}); return; }
    choose_waits(k + 1);
    if (waited_copy(k) < 0) return;
    set_wait(k, true);
    if (windows_ok(/*only_waits=*/true)) choose_waits(k + 1);
    set_wait(k, false);
  }
  // The item whose copy a wait at item k would wait for, or -1. Inside a run of Keep
  // items its prefetch must not be issued beyond the wait.
  int waited_copy(size_t k) const {
    size_t o = k - 1;
    while (o > 0 && items_[o].kind == Item::Keep && !items_[o].wait) --o;
    if (!items_[o].offloads()) return -1;
    if (o + 1 < k && items_[o].lead > 0 && o + static_cast<size_t>(items_[o].lead) >= k) return -1;
    if (o + 1 < k && items_[o].lead < 0) return -1;
    return static_cast<int>(o);
  }
  void set_wait(size_t k, bool wait) { (k == items_.size() ? tail_wait_ : items_[k].wait) = wait; }
  bool waits(size_t k) const { return k == items_.size() ? tail_wait_ : items_[k].wait; }

  // The class rule: each offload copy, started when the op before it ends, ends by
  // the end of the next item's first op -- of its last forward op if it is a Ckpt
  // item that offloads nothing, and of the first op of a Keep item right after that
  // one; of the op of a later Keep item if only Keep items come between -- (before
  // the tail starts unless the tail is the lone loss), unless the next item waits
  // for it. Forward ops wait for nothing else, so their times are running
  // sums. With only_waits, checks only that each
  // wait waits for a copy still running.
  bool windows_ok(bool only_waits = false) const {
    double now = 0;
    std::vector<double> first_op_end(items_.size() + 1), start(items_.size() + 1), forward_end(items_.size());
    std::vector<double> copy_end(items_.size(), 0);
    for (size_t k = 0; k < items_.size(); ++k) {
      const Item& it = items_[k];
      if (it.wait) {
        const int o = waited_copy(k);
        if (o < 0 || copy_end[o] <= now) return false;
        now = copy_end[o];
      }
      start[k] = now;
      if (it.kind == Item::Ckpt) {
        now += chain_.uf_nograd(it.start);
        first_op_end[k] = now;
        if (it.offload) copy_end[k] = now + 1000.0 * chain_.x(it.start) / chain_.link->d2h_bytes_per_s;
        for (int i = it.start + 1; i < it.end; ++i) now += chain_.uf_nograd(i);
        forward_end[k] = now;
      } else {
        now += chain_.uf(it.start);
        first_op_end[k] = now;
        // The input's copy first, then the saved state's, back to back.
        copy_end[k] = now;
        if (it.moves_input()) copy_end[k] += 1000.0 * chain_.own_bytes(it.start) / chain_.link->d2h_bytes_per_s;
        if (it.moves_saved())
          copy_end[k] += 1000.0 * (chain_.xbar(it.start + 1) - chain_.x(it.start + 1)) / chain_.link->d2h_bytes_per_s;
      }
    }
    if (tail_wait_) {
      const int o = waited_copy(items_.size());
      if (o < 0 || copy_end[o] <= now) return false;
      now = copy_end[o];
    }
    if (only_waits) return true;
    start[items_.size()] = now;
    first_op_end[items_.size()] = now + (tail_ == L_ ? chain_.ub(L_) : 0.0);
    for (size_t k = 0; k < items_.size(); ++k) {
      if (!items_[k].offloads()) continue;
      bool waited = false;  // by the item right after it or after a run of Keep items
      for (size_t j = k + 1; j <= items_.size() && !waited; ++j) {
        waited = waits(j) && waited_copy(j) == static_cast<int>(k);
        if (j < items_.size() && items_[j].kind != Item::Keep) break;
      }
      if (waited) continue;
      const bool into_tail = k + 1 == items_.size();
      // A Ckpt item that does not offload lets the copy run through all its forward
      // ops and, if a Keep item follows it, through that item's first op.
      const bool through = !into_tail && items_[k + 1].kind == Item::Ckpt && !items_[k + 1].offload;
      double limit = into_tail && tail_ < L_ ? start[k + 1] : through ? forward_end[k + 1] : first_op_end[k + 1];
      if (through && k + 2 < items_.size() && items_[k + 2].kind == Item::Keep) limit = first_op_end[k + 2];
      // Through the plain Keep items right after it (Note [A copy through a kept
      // run]), wherever its prefetch is issued.
      if (!into_tail && items_[k + 1].kind == Item::Keep) {
        size_t run = 1;
        while (k + run + 1 < items_.size() && items_[k + run + 1].kind == Item::Keep) ++run;
        limit = first_op_end[k + run];
      }
      if (copy_end[k] > limit) return false;
    }
    return true;
  }

  // Picks a persistent schedule for every checkpointed item and the tail.
  void choose_inner(size_t i, std::vector<const std::vector<Op>*> picked) {
    if (i == items_.size()) {
      for (const auto& tail_ops : inner(tail_, L_)) {
        picked.push_back(&tail_ops);
        emit(picked);
        picked.pop_back();
      }
      return;
    }
    if (items_[i].kind != Item::Ckpt) {
      picked.push_back(nullptr);
      choose_inner(i + 1, picked);
      return;
    }
    for (const auto& ops : inner(items_[i].start, items_[i].end - 1)) {
      picked.push_back(&ops);
      choose_inner(i + 1, picked);
      picked.pop_back();
    }
  }

  // The persistent schedule of stages s..end-1 that re-runs each once with fwd_keep.
  static std::vector<Op> keep_every_stage(int s, int end) {
    std::vector<Op> ops;
    for (int k = s; k < end; ++k) ops.push_back({OpKind::FwdKeep, k});
    for (int k = end; k-- > s;) ops.push_back({OpKind::Bwd, k});
    return ops;
  }

  const std::vector<std::vector<Op>>& inner(int s, int t) {
    auto& slot = memo_[{s, t}];
    if (slot.empty()) slot = persistent_schedules_of(L_, s, t);
    return slot;
  }

  void emit(const std::vector<const std::vector<Op>*>& picked) {
    std::vector<Op> ops;
    for (const Item& it : items_) {
      if (it.kind == Item::Ckpt) {
        if (it.wait) ops.push_back({OpKind::WaitOffloads, -1});
        ops.push_back({OpKind::FwdCkpt, it.start});
        if (it.offload) ops.push_back({OpKind::Offload, it.start});
        for (int i = it.start + 1; i < it.end; ++i) ops.push_back({OpKind::FwdDrop, i});
      } else {
        if (it.wait) ops.push_back({OpKind::WaitOffloads, -1});
        ops.push_back({OpKind::FwdKeep, it.start});
        if (it.moves_input()) ops.push_back({OpKind::OffloadInput, it.start});
        if (it.moves_saved()) ops.push_back({OpKind::OffloadSaved, it.start + 1});
      }
    }
    // Backward: the tail, then the items right to left; item k's prefetch goes
    // before (lead: issued when the backward of item k+lead starts, the tail for the
    // last item) or after the backward of item k+1.
    const auto push_prefetch_of = [&](const Item& it) {
      if (it.kind == Item::Ckpt) ops.push_back({OpKind::Prefetch, it.start});
      if (it.moves_saved()) ops.push_back({OpKind::PrefetchSaved, it.start + 1});
      if (it.moves_input()) ops.push_back({OpKind::PrefetchInput, it.start});
    };
    for (size_t j = items_.size() + 1; j-- > 0;) {
      const Item* before = j > 0 ? &items_[j - 1] : nullptr;
      if (j == items_.size() && tail_wait_) ops.push_back({OpKind::WaitOffloads, -1});  // the tail's forward
      for (size_t b = 0; b < j; ++b)
        if (items_[b].offloads() && items_[b].lead > 0 && b + static_cast<size_t>(items_[b].lead) == j)
          push_prefetch_of(items_[b]);
      if (j == items_.size()) {
        ops.insert(ops.end(), picked[j]->begin(), picked[j]->end());
      } else if (items_[j].kind == Item::Ckpt && before && before->lead == -1) {
        if (*picked[j] != keep_every_stage(items_[j].start, items_[j].end)) return;
        const auto first_bwd = std::find_if(picked[j]->begin(), picked[j]->end(),
                                            [](const Op& op) { return op.kind == OpKind::Bwd; });
        ops.insert(ops.end(), picked[j]->begin(), first_bwd);
        push_prefetch_of(*before);
        ops.insert(ops.end(), first_bwd, picked[j]->end());
      } else if (items_[j].kind == Item::Ckpt) {
        ops.insert(ops.end(), picked[j]->begin(), picked[j]->end());
      } else {
        ops.push_back({OpKind::Bwd, items_[j].start});
      }
      if (before && before->offloads() && before->lead == 0) push_prefetch_of(*before);
    }
    const SimResult r = simulate_timeline(chain_, ops);
    if (!r.valid) throw std::logic_error("offload brute force built an invalid schedule: " + r.error);
    out_.push_back({std::move(ops), r.peak_bytes, r.time_ms});
  }

  const Chain& chain_;
  int L_;
  int tail_ = 0;
  bool tail_wait_ = false;
  std::vector<Item> items_;
  std::map<std::pair<int, int>, std::vector<std::vector<Op>>> memo_;
  std::vector<OffloadCandidate> out_;
};

}  // namespace

std::vector<OffloadCandidate> all_offload_class_schedules(const Chain& chain) {
  if (!chain.link) throw std::invalid_argument("the offload class needs chain.link");
  return Builder(chain).run();
}

std::optional<OffloadCandidate> fastest_offload_fitting(const std::vector<OffloadCandidate>& all, int64_t budget_bytes) {
  std::optional<OffloadCandidate> best;
  for (const OffloadCandidate& c : all)
    if (c.peak_bytes <= budget_bytes && (!best || c.time_ms < best->time_ms)) best = c;
  return best;
}

}  // namespace memopt::solver::testing

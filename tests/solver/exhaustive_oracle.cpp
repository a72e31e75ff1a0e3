// exhaustive_oracle.cpp: the branch and bound of Note [What the oracle enumerates].
// It replays each prefix incrementally, op by op, with the rules of docs/formats.md
// docs/formats.md, "Operations and memory without offload: the sequential simulator" and "Offload:
// the timeline simulator", only to prune; every complete plan is judged by simulate_timeline.
#include "tests/solver/exhaustive_oracle.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "solver/chain/simulate.h"

namespace memopt::solver::testing {
namespace {

struct Event {
  double time_ms;
  int64_t order;  // as the simulator orders ties: copy frees first, then program order
  int64_t delta_bytes;
};

bool by_time(const Event& a, const Event& b) {
  return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.order < b.order;
}

// The last copy the current gap put on one link, and when it starts (Note [Copies
// issued too early]); start_ms < 0: none yet.
struct GapCopy {
  Op op{OpKind::Loss, -1};
  double start_ms = -1;
  bool any() const { return start_ms >= 0; }
};

// A prefix of a plan: what is where, when each queue is free, the memory events not
// yet final, and which one-shot ops already ran.
struct Prefix {
  std::vector<Op> ops;
  std::vector<char> plain, saved, grad, hollow, on_host;       // a_k, ā_k, d_k, ā_k beyond a_k on the host, a_k on the host
  std::vector<char> a_out, a_in, saved_out, saved_in;          // Note [What the oracle enumerates]: once each
  std::vector<char> bwd_done;                                  // 0..L-1, and L for the loss
  std::vector<char> keep_done;                                 // fwd_keep i ran (it runs once)
  std::vector<double> ready_ms, on_host_ms, saved_ready_ms, saved_on_host_ms;
  double compute_end_ms = 0, d2h_free_ms = 0, h2d_free_ms = 0;
  int64_t final_total_bytes = 0, final_peak_bytes = 0;         // over the events already final
  std::vector<Event> pending;
  size_t gap_begin = 0;                                        // the first op after the last compute op
  GapCopy gap_d2h, gap_h2d;                                     // d2h copies come first in a gap
  double mandatory_ms = 0;                                     // bwd, loss and fwd_keep still to run
  int last_keep = -1;                                          // the last compute op's stage, when it was a fwd_keep
};

class Search {
 public:
  Search(const Chain& chain, int64_t budget, bool cuts) : c_(chain), L_(chain.length()), budget_(budget), cuts_(cuts) {}

  OracleResult run(const std::vector<Op>* incumbent) {
    // Its residency sums count every object whole (Note [Saved states that stay]).
    for (int k = 0; k <= L_; ++k)
      if (c_.carried(k) > 0) throw std::invalid_argument("oracle: chains with carried bytes are not supported");
    if (incumbent) {
      const SimResult r = simulate_timeline(c_, *incumbent);
      if (!r.valid) throw std::invalid_argument("oracle: the incumbent plan is not valid: " + r.error);
      if (r.peak_bytes <= budget_) {
        out_.ops = *incumbent;
        out_.time_ms = r.time_ms;
        out_.peak_bytes = r.peak_bytes;
      }
    }
    Prefix p;
    const size_t n = static_cast<size_t>(L_) + 2;
    for (auto* v : {&p.plain, &p.saved, &p.grad, &p.hollow, &p.on_host, &p.a_out, &p.a_in, &p.saved_out,
                    &p.saved_in, &p.bwd_done, &p.keep_done})
      v->assign(n, 0);
    for (auto* v : {&p.ready_ms, &p.on_host_ms, &p.saved_ready_ms, &p.saved_on_host_ms}) v->assign(n, 0.0);
    p.plain[0] = 1;
    p.final_total_bytes = p.final_peak_bytes = c_.x(0);
    p.mandatory_ms = c_.ub(L_);
    for (int i = 0; i < L_; ++i) p.mandatory_ms += c_.uf(i) + least_bwd_ms(i);
    if (p.final_peak_bytes <= budget_ && least_peak_bytes() <= budget_) visit(p);
    return std::move(out_);
  }

 private:
  // The least a stage's bwd can cost, back to back with its fwd_keep or not (Note [A
  // stage run back to back] in solver/chain/chain.h): what the bounds count.
  double least_bwd_ms(int i) const { return std::min(c_.ub(i), c_.ub_after_keep(i)); }

  double d2h_ms(int64_t bytes) const { return 1000.0 * static_cast<double>(bytes) / c_.link->d2h_bytes_per_s; }
  double h2d_ms(int64_t bytes) const { return 1000.0 * static_cast<double>(bytes) / c_.link->h2d_bytes_per_s; }

  // What the ops that every plan runs once hold at their start, whatever else is
  // resident: fwd_keep i (its input, ā_{i+1}, its transient), bwd i (d_{i+1},
  // ā_{i+1}, its input, d_i, its transient), and the loss.
  int64_t least_peak_bytes() const {
    int64_t need = c_.x(L_) + c_.x(L_) + c_.btmp(L_);
    for (int i = 0; i < L_; ++i) {
      need = std::max(need, c_.x(i) + c_.xbar(i + 1) + c_.ftmp_keep(i));
      need = std::max(need, c_.x(i + 1) + c_.xbar(i + 1) + 2 * c_.x(i) + c_.btmp(i));
    }
    return need;
  }

  // a_k on the host after its bwd (or the loss, k = L) ran: nothing can use it now.
  bool stranded(const Prefix& p) const {
    for (int k = 0; k <= L_; ++k)
      if (p.on_host[k] && p.bwd_done[k]) return true;
    return false;
  }

  // Note [Saved states that stay]: a lower bound on the peak still to come.
  int64_t least_peak_to_come(const Prefix& p) const {
    // The least bytes of ā_k that must stay until bwd k-1: x_k when its saved state
    // can be (or is) on the host, all of it when it already made its round trip.
    const auto least = [&](int k) { return p.saved_out[k] && !p.hollow[k] ? c_.xbar(k) : c_.x(k); };
    int64_t staying = 0;  // Σ least(k) over the resident ā_k with k < i, as i grows
    int64_t need = 0;
    for (int i = 0; i <= L_; ++i) {
      if (!p.bwd_done[i]) {
        const int64_t input = p.saved[i] ? least(i) : c_.x(i);
        const int64_t working = i < L_ ? c_.x(i + 1) + c_.xbar(i + 1) + input + c_.x(i) + c_.btmp(i)
                                       : input + c_.x(L_) + c_.btmp(L_);
        need = std::max(need, staying + working);
      }
      if (i >= 1 && p.saved[i]) staying += least(i);
    }
    return need;
  }

  // Note [Saved states that stay]: a lower bound on when the plan can end, from the
  // data on the host: each must come back over the h2d link, one copy at a time, and
  // then its consumer and every bwd after it must run.
  double least_end_ms(const Prefix& p) const {
    double all_back = p.h2d_free_ms, end = 0;
    const auto back = [&](double on_host, int64_t bytes, int first_bwd) {
      all_back += h2d_ms(bytes);
      double after = 0;
      for (int j = first_bwd; j >= 0; --j) after += least_bwd_ms(j);
      end = std::max(end, std::max(p.h2d_free_ms, on_host) + h2d_ms(bytes) + after);
    };
    for (int k = 0; k <= L_; ++k) {
      if (p.on_host[k]) back(p.on_host_ms[k], c_.x(k), std::min(k, L_ - 1));
      if (k >= 1 && p.hollow[k] && !p.saved_in[k]) back(p.saved_on_host_ms[k], c_.xbar(k) - c_.x(k), k - 1);
    }
    return std::max(end, all_back);
  }

  bool hopeless(const Prefix& p) const {
    if (stranded(p)) return true;
    if (p.final_peak_bytes > budget_) return true;
    if (cuts_ && least_peak_to_come(p) > budget_) return true;
    if (!out_.ops) return false;
    if (p.compute_end_ms + p.mandatory_ms >= out_.time_ms) return true;
    return cuts_ && least_end_ms(p) >= out_.time_ms;
  }

  // Note [Equal futures]: the part of a prefix its continuations depend on, with
  // every time taken relative to the end of its last compute op.
  std::string future_key(const Prefix& p) const {
    std::string key;
    const auto put = [&key](const auto& value) {
      const char* bytes = reinterpret_cast<const char*>(&value);
      key.append(bytes, sizeof value);
    };
    const double now = p.compute_end_ms;
    const auto later = [now](double t) { return std::max(0.0, t - now); };
    for (const auto* v : {&p.plain, &p.saved, &p.grad, &p.hollow, &p.on_host, &p.a_out, &p.a_in, &p.saved_out,
                          &p.saved_in, &p.bwd_done, &p.keep_done})
      key.append(v->data(), v->size());
    put(p.last_keep);
    for (int k = 0; k <= L_ + 1; ++k) {
      put(p.plain[k] ? later(p.ready_ms[k]) : 0.0);
      put(p.on_host[k] ? later(p.on_host_ms[k]) : 0.0);
      put(p.saved[k] ? later(p.saved_ready_ms[k]) : 0.0);
      put(p.hollow[k] ? later(p.saved_on_host_ms[k]) : 0.0);
    }
    put(later(p.d2h_free_ms));
    put(later(p.h2d_free_ms));
    put(p.final_total_bytes);
    put(p.gap_d2h.any() ? p.gap_d2h.start_ms - now : -1.0);
    put(p.gap_h2d.any() ? p.gap_h2d.start_ms - now : -1.0);
    for (size_t q = p.gap_begin; q < p.ops.size(); ++q) { put(p.ops[q].kind); put(p.ops[q].index); }
    // Pending events in the order the simulator will count them; a copy's end keeps
    // its rank before every op at the same instant, the others only their sequence.
    std::vector<Event> pending = p.pending;
    std::sort(pending.begin(), pending.end(), by_time);
    for (const Event& e : pending) {
      put(e.time_ms - now);
      put(e.order < 0);
      put(e.delta_bytes);
    }
    return key;
  }

  // True when an earlier prefix reached the same future no later (Note [Equal futures]).
  bool dominated(const Prefix& p) {
    if (!cuts_) return false;
    auto [it, inserted] = seen_.try_emplace(future_key(p), p.compute_end_ms);
    if (inserted) return false;
    if (it->second <= p.compute_end_ms) return true;
    it->second = p.compute_end_ms;
    return false;
  }

  void visit(Prefix& p) {
    if (dominated(p)) { ++out_.num_dominated; return; }
    ++out_.num_nodes;
    if (p.bwd_done[0]) { finish(p); return; }
    computes(p);
    if (c_.link) copies(p);
  }

  void finish(const Prefix& p) {
    ++out_.num_plans;
    const SimResult r = simulate_timeline(c_, p.ops);
    if (!r.valid) return;  // something left on the host or resident: not a plan
    if (r.peak_bytes > budget_) return;
    if (!out_.ops || r.time_ms < out_.time_ms) {
      out_.ops = p.ops;
      out_.time_ms = r.time_ms;
      out_.peak_bytes = r.peak_bytes;
    }
  }

  void copies(const Prefix& p) {
    // Note [Waiting for the offloads] (simulate.h): only while an offload still runs.
    if (p.d2h_free_ms > p.compute_end_ms) try_wait(p);
    for (int k = 0; k <= L_; ++k) {
      if (!p.gap_h2d.any()) {
        // Note [A kept stage keeps its input] (simulate.h): not while ā_{k+1} is resident.
        if (p.plain[k] && !p.on_host[k] && !p.a_out[k] && !(k < L_ && p.saved[k + 1]))
          try_copy(p, {OpKind::Offload, k});
        if (k >= 1 && p.saved[k] && !p.hollow[k] && !p.saved_out[k]) try_copy(p, {OpKind::OffloadSaved, k});
      }
      if (p.on_host[k] && !p.a_in[k])
        try_copy(p, {OpKind::Prefetch, k});
      if (k >= 1 && p.hollow[k] && !p.saved_in[k])
        try_copy(p, {OpKind::PrefetchSaved, k});
    }
  }

  // The compute cursor moves to the end of the last offload; copies issued after the
  // wait start from there, d2h ones included (the wait does not wait for them), so
  // the gap's canonical order starts again.
  void try_wait(const Prefix& from) {
    Prefix p = from;
    p.compute_end_ms = p.d2h_free_ms;
    p.gap_d2h = p.gap_h2d = {};
    p.ops.push_back({OpKind::WaitOffloads, -1});
    if (!hopeless(p)) visit(p);
  }

  void try_copy(const Prefix& from, Op op) {
    Prefix p = from;
    const int k = op.index;
    const int64_t order = 2 * static_cast<int64_t>(p.ops.size());
    const double issue = p.compute_end_ms;
    switch (op.kind) {
      case OpKind::Offload: {
        const double start = std::max({issue, p.ready_ms[k], p.d2h_free_ms}), end = start + d2h_ms(c_.x(k));
        p.d2h_free_ms = end;
        p.pending.push_back({end, -1, -c_.x(k)});
        p.on_host[k] = 1; p.on_host_ms[k] = end; p.plain[k] = 0; p.a_out[k] = 1;
        p.gap_d2h = {op, start};
        break;
      }
      case OpKind::OffloadSaved: {
        const int64_t bytes = c_.xbar(k) - c_.x(k);
        const double start = std::max({issue, p.saved_ready_ms[k], p.d2h_free_ms}), end = start + d2h_ms(bytes);
        p.d2h_free_ms = end;
        p.pending.push_back({end, -1, -bytes});
        p.hollow[k] = 1; p.saved_on_host_ms[k] = end; p.saved_out[k] = 1;
        p.gap_d2h = {op, start};
        break;
      }
      case OpKind::Prefetch: {
        p.pending.push_back({issue, order, c_.x(k)});
        const double start = std::max({issue, p.h2d_free_ms, p.on_host_ms[k]}), end = start + h2d_ms(c_.x(k));
        p.h2d_free_ms = end;
        p.on_host[k] = 0; p.plain[k] = 1; p.ready_ms[k] = end; p.a_in[k] = 1;
        p.gap_h2d = {op, start};
        break;
      }
      case OpKind::PrefetchSaved: {
        const int64_t bytes = c_.xbar(k) - c_.x(k);
        p.pending.push_back({issue, order, bytes});
        const double start = std::max({issue, p.h2d_free_ms, p.saved_on_host_ms[k]}), end = start + h2d_ms(bytes);
        p.h2d_free_ms = end;
        p.hollow[k] = 0; p.saved_ready_ms[k] = end; p.saved_in[k] = 1;
        p.gap_h2d = {op, start};
        break;
      }
      default: throw std::logic_error("oracle: not a copy");
    }
    p.ops.push_back(op);
    visit(p);
  }

  bool input_of(const Prefix& p, int i) const { return p.plain[i] || p.saved[i]; }
  bool output_free(const Prefix& p, int i) const { return !p.plain[i + 1] && !p.saved[i + 1] && !p.on_host[i + 1]; }
  // Something can still consume a_{k}: its bwd (k < L) or the loss (k = L) has not run.
  bool consumable(const Prefix& p, int k) const { return !p.bwd_done[k]; }

  void computes(const Prefix& p) {
    // The backward first: plans that reach the end early give the bound its teeth.
    for (int i = 0; i < L_; ++i)
      if (p.grad[i + 1] && p.saved[i + 1] && !p.hollow[i + 1] && input_of(p, i) && !p.bwd_done[i])
        try_compute(p, {OpKind::Bwd, i});
    if (!p.bwd_done[L_] && input_of(p, L_) && !p.grad[L_]) try_compute(p, {OpKind::Loss, -1});
    for (int i = L_ - 1; i >= 0; --i) {
      if (!output_free(p, i)) continue;
      if (input_of(p, i) && !p.keep_done[i] && !p.bwd_done[i]) try_compute(p, {OpKind::FwdKeep, i});
      if (!consumable(p, i + 1)) continue;
      if (input_of(p, i)) try_compute(p, {OpKind::FwdCkpt, i});
      if (p.plain[i]) try_compute(p, {OpKind::FwdDrop, i});
    }
  }

  // Note [Copies issued too early]: the gap's last copy on a link starts at or after
  // the end of the compute op `op` (ending at end_ms), which does not wait for it.
  bool issued_too_early(const Prefix& p, const Op& op, const ComputeCost& cost, double end_ms) const {
    if (!cuts_) return false;
    if (p.gap_d2h.any() && p.gap_d2h.start_ms >= end_ms) {
      // Unless its data comes back in this gap: `op` may wait for that prefetch.
      const Op back{p.gap_d2h.op.kind == OpKind::Offload ? OpKind::Prefetch : OpKind::PrefetchSaved, p.gap_d2h.op.index};
      if (std::find(p.ops.begin() + static_cast<std::ptrdiff_t>(p.gap_begin), p.ops.end(), back) == p.ops.end())
        return true;
    }
    if (!p.gap_h2d.any() || p.gap_h2d.start_ms < end_ms) return false;
    const Op& copy = p.gap_h2d.op;
    const bool waits = copy.kind == OpKind::Prefetch ? cost.reads == copy.index
                                                     : op.kind == OpKind::Bwd && op.index + 1 == copy.index;
    return !waits;
  }

  void try_compute(const Prefix& from, Op op) {
    Prefix p = from;
    const int i = op.index;
    const int64_t order = 2 * static_cast<int64_t>(p.ops.size());
    double ready = p.compute_end_ms;
    const auto wait_for = [&](int k) { if (p.plain[k]) ready = std::max(ready, p.ready_ms[k]); };
    // Only a bwd right after its own fwd_keep has a price of its own; last_keep is this
    // oracle's own record of it.
    const ComputeCost cost = compute_cost(c_, op, op.kind == OpKind::Bwd && p.last_keep == i);
    wait_for(cost.reads);
    if (op.kind == OpKind::Bwd) ready = std::max(ready, p.saved_ready_ms[i + 1]);
    const int64_t add = cost.add_bytes, tmp = cost.tmp_bytes;
    const double dur = cost.dur_ms;
    int64_t remove = 0;
    const double start = ready, end = start + dur;
    if (issued_too_early(p, op, cost, end)) return;
    size_t n_final = 0;
    // Note [What the oracle enumerates]: every later event is at or after `start`,
    // and one at `start` that sorts before this op's start is a free of 0 bytes.
    p.pending.push_back({start, order, add + tmp});
    std::sort(p.pending.begin(), p.pending.end(), by_time);
    while (n_final < p.pending.size() &&
           (p.pending[n_final].time_ms < start || (p.pending[n_final].time_ms == start && p.pending[n_final].order <= order))) {
      p.final_total_bytes += p.pending[n_final].delta_bytes;
      p.final_peak_bytes = std::max(p.final_peak_bytes, p.final_total_bytes);
      ++n_final;
    }
    p.pending.erase(p.pending.begin(), p.pending.begin() + static_cast<std::ptrdiff_t>(n_final));
    switch (op.kind) {
      case OpKind::FwdKeep:
        p.saved[i + 1] = 1; p.saved_ready_ms[i + 1] = end; p.keep_done[i] = 1;
        p.mandatory_ms -= c_.uf(i);
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        p.plain[i + 1] = 1; p.ready_ms[i + 1] = end;
        if (op.kind == OpKind::FwdDrop) { remove += c_.x(i); p.plain[i] = 0; }
        break;
      case OpKind::Loss:
        p.grad[L_] = 1; p.bwd_done[L_] = 1;
        if (p.plain[L_]) { remove += c_.x(L_); p.plain[L_] = 0; }
        p.mandatory_ms -= c_.ub(L_);
        break;
      case OpKind::Bwd:
        p.grad[i] = 1; p.bwd_done[i] = 1;
        remove += c_.x(i + 1) + c_.xbar(i + 1);
        p.grad[i + 1] = 0; p.saved[i + 1] = 0;
        if (p.plain[i]) { remove += c_.x(i); p.plain[i] = 0; }
        p.mandatory_ms -= least_bwd_ms(i);
        break;
      default: break;
    }
    p.pending.push_back({end, order + 1, -(tmp + remove)});
    p.last_keep = op.kind == OpKind::FwdKeep ? i : -1;
    p.compute_end_ms = end;
    p.gap_d2h = p.gap_h2d = {};
    p.ops.push_back(op);
    p.gap_begin = p.ops.size();
    if (!hopeless(p)) visit(p);
  }

  const Chain& c_;
  int L_;
  int64_t budget_;
  bool cuts_;
  OracleResult out_;
  std::unordered_map<std::string, double> seen_;  // future key -> least compute_end_ms reaching it
};

}  // namespace

OracleResult fastest_valid_plan(const Chain& chain, int64_t budget_bytes, const std::vector<Op>* incumbent) {
  return Search(chain, budget_bytes, /*cuts=*/true).run(incumbent);
}

OracleResult fastest_valid_plan_without_cuts(const Chain& chain, int64_t budget_bytes) {
  return Search(chain, budget_bytes, /*cuts=*/false).run(nullptr);
}

}  // namespace memopt::solver::testing

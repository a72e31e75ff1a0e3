// simulate.cpp: the two simulators of docs/formats.md, "Operations and memory without offload: the
// sequential simulator" and "Offload: the timeline simulator".
#include "solver/chain/simulate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace memopt::solver {
namespace {

std::string op_label(const std::vector<Op>& ops, int p) {
  return "op " + std::to_string(p) + " (" + to_string(ops[p]) + ")";
}

// Which activations exist on the device. ā_k contains a_k, and docs/formats.md, "Operations and
// memory without offload: the sequential simulator" never has
// both, so one slot per index keeps plain and saved apart.
struct Residency {
  std::vector<char> plain, saved, grad;  // a_k, ā_k, d_k for k in 0..L+1
  Residency() = default;
  explicit Residency(int L) { reset(L); }
  void reset(int L) {
    plain.assign(L + 2, 0);
    saved.assign(L + 2, 0);
    grad.assign(L + 2, 0);
  }
  bool input_of(int i) const { return plain[i] || saved[i]; }
};

// Note [Carried bytes] in chain.h: the bytes of a_k (or d_k) that another present
// one also holds -- the prefix shared with the nearest one on either side, since
// sharing only shrinks with distance. `present(j)` is never asked for j == k.
template <typename Present>
int64_t overlap(const Chain& chain, int k, Present present) {
  if (chain.stands_alone(k)) return 0;  // both walks below stop at their first step
  int64_t best = 0;
  int64_t run = chain.x(k);
  for (int j = k - 1; j >= 0 && run > best; --j) {
    run = std::min(run, chain.carried(j + 1));
    if (run > best && present(j)) { best = run; break; }
  }
  run = chain.x(k);
  for (int j = k + 1; j <= chain.length() && run > best; ++j) {
    run = std::min(run, chain.carried(j));
    if (run > best && present(j)) { best = run; break; }
  }
  return best;
}
// a_k's bytes another activation on the device holds (plain, or inside its ā_j).
int64_t activation_overlap(const Chain& chain, const Residency& r, int k) {
  return overlap(chain, k, [&](int j) { return r.plain[j] || r.saved[j]; });
}
int64_t gradient_overlap(const Chain& chain, const Residency& r, int k) {
  return overlap(chain, k, [&](int j) { return r.grad[j] != 0; });
}

// Checks what op p needs (docs/formats.md, "Operations and memory without offload: the sequential
// simulator" table) and returns an error, or an empty string.
std::string check_needs(const Chain& chain, const Residency& r, const std::vector<Op>& ops, int p) {
  const int L = chain.length();
  const Op& op = ops[p];
  const auto missing = [&](const std::string& what) {
    return op_label(ops, p) + ": needs " + what + ", which is not resident";
  };
  if (op.kind != OpKind::Loss && (op.index < 0 || op.index >= L)) {
    if (!(op.kind == OpKind::Offload || op.kind == OpKind::Prefetch) || op.index > L || op.index < 0)
      return op_label(ops, p) + ": index out of range for a chain of " + std::to_string(L) + " stages";
  }
  const int i = op.index;
  switch (op.kind) {
    case OpKind::FwdKeep:
    case OpKind::FwdCkpt:
      if (!r.input_of(i)) return missing("the input of stage " + std::to_string(i) + " (a_" + std::to_string(i) + ")");
      if (r.plain[i + 1] || r.saved[i + 1])
        return op_label(ops, p) + ": a_" + std::to_string(i + 1) + " is already resident";
      return {};
    case OpKind::FwdDrop:
      if (!r.plain[i]) {
        if (r.saved[i]) return op_label(ops, p) + ": fwd_drop needs a plain a_" + std::to_string(i) + " but only ā_" + std::to_string(i) + " is resident (use fwd_ckpt or fwd_keep)";
        return missing("a_" + std::to_string(i));
      }
      if (r.plain[i + 1] || r.saved[i + 1])
        return op_label(ops, p) + ": a_" + std::to_string(i + 1) + " is already resident";
      return {};
    case OpKind::Loss:
      if (!r.input_of(L)) return missing("a_" + std::to_string(L) + " (the last stage's output)");
      if (r.grad[L]) return op_label(ops, p) + ": d_" + std::to_string(L) + " is already resident";
      return {};
    case OpKind::Bwd:
      if (!r.grad[i + 1]) return missing("d_" + std::to_string(i + 1) + (i + 1 == L ? " (run loss first)" : " (run bwd " + std::to_string(i + 1) + " first)"));
      if (!r.saved[i + 1]) return missing("ā_" + std::to_string(i + 1) + " (stage " + std::to_string(i) + " must run fwd_keep before its bwd)");
      if (!r.input_of(i)) return missing("the input of stage " + std::to_string(i));
      return {};
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::OffloadInput:
    case OpKind::PrefetchInput:
    case OpKind::OffloadCarried:
    case OpKind::PrefetchCarried:
    case OpKind::WaitOffloads:
      return {};
  }
  return {};
}

std::string check_end(const Chain& chain, const Residency& r) {
  const int L = chain.length();
  if (!r.grad[0]) return "the schedule ends without d_0 (the gradient of the input): the backward is incomplete";
  for (int k = 0; k <= L + 1; ++k) {
    if (r.plain[k]) return "the schedule ends with a_" + std::to_string(k) + " still resident";
    if (r.saved[k]) return "the schedule ends with ā_" + std::to_string(k) + " still resident";
    if (k > 0 && r.grad[k]) return "the schedule ends with d_" + std::to_string(k) + " still resident";
  }
  return {};
}

std::string carried_copy_error(const std::vector<Op>& ops, int p, int64_t shared_bytes) {
  return op_label(ops, p) + ": a_" + std::to_string(ops[p].index) + " shares " + std::to_string(shared_bytes) +
         " carried bytes with another activation on the device (docs/formats.md, \"Carried bytes\"); move it only when no "
         "activation of its run is resident";
}

SimResult fail(SimResult r, int p, std::string error) {
  r.valid = false;
  r.error_op = p;
  r.error = std::move(error);
  return r;
}

}  // namespace

SimResult simulate_sequential(const Chain& chain, const std::vector<Op>& ops) {
  const int L = chain.length();
  Residency r(L);
  r.plain[0] = 1;
  int64_t resident = chain.x(0);
  SimResult out;
  out.peak_bytes = resident;
  double time_ms = 0;
  const auto reach = [&](int64_t bytes, int p) {
    if (bytes > out.peak_bytes) { out.peak_bytes = bytes; out.peak_op = p; }
  };
  BackToBack back_to_back;
  for (int p = 0; p < static_cast<int>(ops.size()); ++p) {
    const Op& op = ops[p];
    if (needs_timeline(op.kind))
      return fail(out, p, op_label(ops, p) + ": copies and waits need the timeline simulator (docs/formats.md, \"Offload: the timeline simulator\")");
    if (std::string e = check_needs(chain, r, ops, p); !e.empty()) return fail(out, p, e);
    const int i = op.index;
    time_ms += compute_cost(chain, op, back_to_back.next(op)).dur_ms;
    switch (op.kind) {
      case OpKind::FwdKeep:
        resident += chain.xbar(i + 1) - activation_overlap(chain, r, i + 1);
        r.saved[i + 1] = 1;
        reach(resident + chain.ftmp_keep(i), p);
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        resident += chain.x(i + 1) - activation_overlap(chain, r, i + 1);
        r.plain[i + 1] = 1;
        reach(resident + chain.ftmp(i), p);
        if (op.kind == OpKind::FwdDrop) { r.plain[i] = 0; resident -= chain.x(i) - activation_overlap(chain, r, i); }
        break;
      case OpKind::Loss:
        resident += chain.x(L) - gradient_overlap(chain, r, L);
        r.grad[L] = 1;
        reach(resident + chain.btmp(L), p);
        if (r.plain[L]) { r.plain[L] = 0; resident -= chain.x(L) - activation_overlap(chain, r, L); }
        break;
      case OpKind::Bwd:
        resident += chain.x(i) - gradient_overlap(chain, r, i);
        r.grad[i] = 1;
        reach(resident + chain.btmp(i), p);
        r.grad[i + 1] = 0;
        resident -= chain.x(i + 1) - gradient_overlap(chain, r, i + 1);
        r.saved[i + 1] = 0;
        resident -= chain.xbar(i + 1) - activation_overlap(chain, r, i + 1);
        if (r.plain[i]) { r.plain[i] = 0; resident -= chain.x(i) - activation_overlap(chain, r, i); }
        break;
      case OpKind::Offload:
      case OpKind::Prefetch:
      case OpKind::OffloadSaved:
      case OpKind::PrefetchSaved:
      case OpKind::OffloadInput:
      case OpKind::PrefetchInput:
      case OpKind::OffloadCarried:
      case OpKind::PrefetchCarried:
      case OpKind::WaitOffloads:  // refused above: the timeline simulator's
        break;
    }
  }
  out.time_ms = time_ms;
  if (std::string e = check_end(chain, r); !e.empty()) return fail(out, static_cast<int>(ops.size()), e);
  out.valid = true;
  return out;
}

namespace {

// Where a plain a_k is, for the timeline simulator.
enum class Place { None, Device, OnHost };

struct MemEvent {
  double time_ms;
  int64_t order;   // ties: copy-end frees first, then program order (start 2p, end 2p+1)
  int64_t delta_bytes;
  int op;          // the op whose start this is (for peak_op), -1 for frees
};

// Bytes of a_k that leave while a_k stays: its own bytes (Note [A kept stage's input may
// leave]) or its ending carry (Note [Carried bytes may leave]). Set up at the first such
// op only: most plans have none, and the polish simulates thousands of them (Note [The
// timeline's buffers]).
struct MovedBytes {
  bool used = false;
  std::vector<char> out;                     // on the host
  std::vector<double> ready_ms, on_host_ms;  // when last complete on the device / on the host
  void use(int L) {
    if (used) return;
    used = true;
    out.assign(L + 2, 0);
    ready_ms.assign(L + 2, 0.0);
    on_host_ms.assign(L + 2, 0.0);
  }
  bool is_out(int k) const { return used && out[k]; }
  double ready(int k) const { return used ? ready_ms[k] : 0.0; }
};

// The bounds of Note [Stopping over the budget].
struct Stops {
  int64_t above_bytes = std::numeric_limits<int64_t>::max();
  double after_ms = std::numeric_limits<double>::infinity();
  bool timed() const { return after_ms < std::numeric_limits<double>::infinity(); }
  double late_ms() const { return after_ms + 1e-9 * std::abs(after_ms); }
};

// Note [The timeline's buffers]
// The polish simulates thousands of plans per solve, and allocating this state anew
// for each had cost about a tenth of its time; each thread keeps one and
// simulate_timeline resets it (simulations never nest). Copying one state into
// another reuses the target's storage too (Note [Resuming from a shared prefix]).
//
// Everything the timeline simulator knows after the first `ran` ops of a plan.
struct TimelineState {
  Residency r;
  std::vector<Place> place;
  std::vector<double> ready_ms, on_host_ms;  // when a_k's data is on the device / its offload ended
  // ā_k beyond a_k (Note [Offloading saved state]): on the host while hollow, and
  // when it was last complete on the device / on the host.
  std::vector<char> hollow;
  std::vector<double> saved_ready_ms, saved_on_host_ms;
  MovedBytes inputs, carries;
  std::vector<MemEvent> events;  // in program order (Note [Events in time order])
  std::vector<MemEvent> frees;   // at the ends of offload copies
  // Note [The walk's settled start]: the total and the peak of the events and frees
  // already folded out of the two lists, and the op that reached that peak first.
  int64_t settled_total = 0, settled_peak_bytes = 0;
  int settled_peak_op = -1;
  // One per op run, -1 where none; only where the state keeps them (Note [Op times only
  // for whole simulations]).
  std::vector<double> op_start_ms, offload_end_ms;
  bool keeps_op_times = true;
  // Note [Stopping over the budget]: the program-order events' sum and every free so far.
  int64_t program_bytes = 0, freed_bytes = 0;
  bool in_time_order = true;
  bool over = false;  // a prefetch's allocation put the plan surely over the bound
  double compute_end = 0;  // the compute cursor: end of the previous compute op
  double d2h_free = 0, h2d_free = 0, last_copy_end = 0;
  double compute_left_ms = 0;  // the compute time still to run, for a bound on the time
  // For resuming under other bounds (Note [Resuming from a shared prefix]): the most
  // that record_event compared with a byte bound, and the latest end a compute op
  // surely implied, over the ops run.
  int64_t most_in_order_bytes = std::numeric_limits<int64_t>::min();
  double latest_implied_end_ms = -std::numeric_limits<double>::infinity();
  SimResult out;  // copy_ms and stall_ms so far
  // What the last op added to out.copy_ms and out.stall_ms, -1 where nothing (every
  // addend is >= 0): Note [Runs that rejoin the base] replays them.
  double copy_added = -1, stall_added = -1;
  BackToBack back_to_back;  // which bwd runs right after its own fwd_keep, for its price
  int ran = 0;

  void start(const Chain& chain, double compute_ms, bool keep_op_times = true) {
    keeps_op_times = keep_op_times;
    const int L = chain.length();
    r.reset(L);
    r.plain[0] = 1;
    place.assign(L + 2, Place::None);
    place[0] = Place::Device;
    ready_ms.assign(L + 2, 0.0);
    on_host_ms.assign(L + 2, 0.0);
    hollow.assign(L + 2, 0);
    saved_ready_ms.assign(L + 2, 0.0);
    saved_on_host_ms.assign(L + 2, 0.0);
    inputs.used = carries.used = false;
    events.clear();
    frees.clear();
    events.push_back({0.0, -2, chain.x(0), -1});
    settled_total = 0;
    settled_peak_bytes = SimResult{}.peak_bytes;
    settled_peak_op = SimResult{}.peak_op;
    op_start_ms.clear();
    offload_end_ms.clear();
    program_bytes = chain.x(0);
    freed_bytes = 0;
    in_time_order = true;
    over = false;
    compute_end = d2h_free = h2d_free = last_copy_end = 0;
    compute_left_ms = compute_ms;
    most_in_order_bytes = std::numeric_limits<int64_t>::min();
    latest_implied_end_ms = -std::numeric_limits<double>::infinity();
    out = SimResult{};
    copy_added = stall_added = -1;
    back_to_back = {};
    ran = 0;
  }
};

// Runs ops on a TimelineState, one at a time.
class Timeline {
 public:
  Timeline(const Chain& chain, const std::vector<Op>& ops, const Stops& stops, TimelineState& s)
      : chain_(chain), ops_(ops), stops_(stops), s_(s), L_(chain.length()) {}

  // Runs op s.ran; returns false where the simulation ends there, failed or stopped
  // (then `result` holds its outcome).
  bool step(SimResult& result);
  // After the last op: the end checks, the peak, and the offloads' ends.
  SimResult finish();

 private:
  SimResult fail(int p, std::string error) const {
    SimResult r = s_.out;
    r.valid = false;
    r.error_op = p;
    r.error = std::move(error);
    return r;
  }
  SimResult stopped(int p) const {
    SimResult r = fail(p, "holds more than the bound on its bytes");
    r.stopped_over = true;
    r.peak_bytes = s_.program_bytes + s_.freed_bytes;
    return r;
  }
  // Records a program-order event; true once the plan surely holds more than the bound.
  bool record_event(const MemEvent& e) {
    s_.in_time_order = s_.in_time_order && e.time_ms >= s_.events.back().time_ms;
    s_.events.push_back(e);
    s_.program_bytes += e.delta_bytes;
    if (!s_.in_time_order) return false;
    s_.most_in_order_bytes = std::max(s_.most_in_order_bytes, s_.program_bytes + s_.freed_bytes);
    return s_.program_bytes + s_.freed_bytes > stops_.above_bytes;
  }
  std::string need_link(int p) const {
    if (!chain_.link) return op_label(ops_, p) + ": the profile has no `link` bandwidth, so it cannot offload; add one to the profile";
    return {};
  }
  // Section 5.2: op p copies `bytes`, complete on the device since `data_ms`, to the
  // host, and frees them when the copy ends (returned).
  double offload_copy(int p, double data_ms, int64_t bytes) {
    const double start = std::max({s_.compute_end, data_ms, s_.d2h_free});
    const double end = start + chain_.link->d2h_ms(bytes);
    s_.d2h_free = end;
    s_.last_copy_end = std::max(s_.last_copy_end, end);
    s_.copy_added = end - start;
    s_.out.copy_ms += s_.copy_added;
    s_.frees.push_back({end, -1, -bytes, -1});
    s_.freed_bytes -= bytes;
    if (s_.keeps_op_times) s_.offload_end_ms[p] = end;
    return end;
  }
  // Op p allocates `bytes` at issue and copies them back from the host, where they
  // are since `on_host_ms`; returns when the copy ends.
  double prefetch_copy(int p, double on_host_ms, int64_t bytes) {
    s_.over = record_event({s_.compute_end, 2 * static_cast<int64_t>(p), bytes, p}) || s_.over;
    if (s_.keeps_op_times) s_.op_start_ms[p] = s_.compute_end;  // it allocates at issue
    const double start = std::max({s_.compute_end, s_.h2d_free, on_host_ms});
    const double end = start + chain_.link->h2d_ms(bytes);
    s_.h2d_free = end;
    s_.last_copy_end = std::max(s_.last_copy_end, end);
    s_.copy_added = end - start;
    s_.out.copy_ms += s_.copy_added;
    return end;
  }
  std::string copy(int p);      // a copy op's effect, or an error
  std::string compute(int p);   // a compute op's, or an error; "" and s_.over for a stop

  const Chain& chain_;
  const std::vector<Op>& ops_;
  const Stops& stops_;
  TimelineState& s_;
  const int L_;
  bool stopped_late_ = false;
};

std::string Timeline::copy(int p) {
  TimelineState& s = s_;
  const Op& op = ops_[p];
  const int i = op.index, L = L_;
  Residency& r = s.r;
  if (op.kind == OpKind::Offload) {
    if (std::string e = need_link(p); !e.empty()) return e;
    if (i < 0 || i > L) return op_label(ops_, p) + ": index out of range for a chain of " + std::to_string(L) + " stages";
    if (!r.plain[i] || s.place[i] != Place::Device) {
      if (r.saved[i]) return op_label(ops_, p) + ": only plain activations can be offloaded, and a_" + std::to_string(i) + " is held as ā_" + std::to_string(i);
      return op_label(ops_, p) + ": a_" + std::to_string(i) + " is not resident on the device";
    }
    if (i < L && r.saved[i + 1])  // Note [A kept stage keeps its input]
      return op_label(ops_, p) + ": a_" + std::to_string(i) + " is the input of stage " + std::to_string(i) +
             ", whose saved state ā_" + std::to_string(i + 1) + " is on the device and may hold it; " +
             "offload it before fwd_keep " + std::to_string(i) + " or after bwd " + std::to_string(i) +
             ", or move it with offload_input " + std::to_string(i);
    if (const int64_t shared = activation_overlap(chain_, r, i); shared > 0) return carried_copy_error(ops_, p, shared);
    s.on_host_ms[i] = offload_copy(p, s.ready_ms[i], chain_.x(i));
    s.place[i] = Place::OnHost;
    r.plain[i] = 0;
    return {};
  }
  if (op.kind == OpKind::Prefetch) {
    if (std::string e = need_link(p); !e.empty()) return e;
    if (i < 0 || i > L) return op_label(ops_, p) + ": index out of range for a chain of " + std::to_string(L) + " stages";
    if (s.place[i] != Place::OnHost) return op_label(ops_, p) + ": a_" + std::to_string(i) + " is not on the host (offload it first)";
    if (const int64_t shared = activation_overlap(chain_, r, i); shared > 0) return carried_copy_error(ops_, p, shared);
    s.ready_ms[i] = prefetch_copy(p, s.on_host_ms[i], chain_.x(i));
    s.place[i] = Place::Device;
    r.plain[i] = 1;
    return {};
  }
  if (op.kind == OpKind::OffloadSaved || op.kind == OpKind::PrefetchSaved) {
    if (std::string e = need_link(p); !e.empty()) return e;
    if (i < 1 || i > L)
      return op_label(ops_, p) + ": ā_" + std::to_string(i) + " does not exist; saved states are ā_1..ā_" + std::to_string(L);
    const int64_t bytes = chain_.hollow_bytes(i);
    if (op.kind == OpKind::OffloadSaved) {
      if (!r.saved[i] || s.hollow[i])
        return op_label(ops_, p) + ": ā_" + std::to_string(i) + (r.saved[i] ? " is already on the host" : " is not resident (stage " + std::to_string(i - 1) + " must run fwd_keep first)");
      s.saved_on_host_ms[i] = offload_copy(p, s.saved_ready_ms[i], bytes);
      s.hollow[i] = 1;
    } else {
      if (!r.saved[i] || !s.hollow[i])
        return op_label(ops_, p) + ": the saved state of ā_" + std::to_string(i) + " is not on the host (offload_saved it first)";
      s.saved_ready_ms[i] = prefetch_copy(p, s.saved_on_host_ms[i], bytes);
      s.hollow[i] = 0;
    }
    return {};
  }
  if (op.kind == OpKind::OffloadInput || op.kind == OpKind::PrefetchInput || op.kind == OpKind::OffloadCarried ||
      op.kind == OpKind::PrefetchCarried) {
    // Note [A kept stage's input may leave], Note [Carried bytes may leave] (simulate.h).
    if (std::string e = need_link(p); !e.empty()) return e;
    if (i < 0 || i >= L)
      return op_label(ops_, p) + ": a_" + std::to_string(i) + " is the input of no stage; inputs are a_0..a_" + std::to_string(L - 1);
    const bool own = op.kind == OpKind::OffloadInput || op.kind == OpKind::PrefetchInput;
    const bool offload = op.kind == OpKind::OffloadInput || op.kind == OpKind::OffloadCarried;
    MovedBytes& moved = own ? s.inputs : s.carries;
    const auto what_is = [&] { return "a_" + std::to_string(i) + (own ? "'s own bytes are" : "'s ending carry is"); };
    const int64_t bytes = own ? chain_.own_bytes(i) : chain_.ending_carried_bytes(i);
    // a_first .. a_i hold the bytes; each of stages first .. i must have run fwd_keep.
    const int first = own ? i : chain_.first_holder_of_ending_carry(i);
    moved.use(L);
    if (offload) {
      if (moved.out[i]) return op_label(ops_, p) + ": " + what_is() + " already on the host";
      double data_ms = moved.ready_ms[i];
      for (int m = first; m <= i; ++m) {
        if (!r.saved[m + 1])
          return op_label(ops_, p) + ": stage " + std::to_string(m) + " has not run fwd_keep, so a_" + std::to_string(m) +
                 (own ? " is no kept stage's input (use offload " + std::to_string(m) + ")"
                      : ", which holds part of a_" + std::to_string(i) + "'s ending carry, may still be read; move it once stages " +
                            std::to_string(first) + ".." + std::to_string(i) + " have all run fwd_keep");
        if (!(r.saved[m] || (r.plain[m] && s.place[m] == Place::Device)))
          return op_label(ops_, p) + ": a_" + std::to_string(m) + " is not resident on the device";
        data_ms = std::max(data_ms, s.ready_ms[m]);
      }
      if (bytes <= 0)
        return op_label(ops_, p) + ": a_" + std::to_string(i) +
               (own ? " shares all its bytes with a neighbour (docs/formats.md, \"Carried bytes\"); it has nothing of its own to move"
                    : " passes on every byte it carries from a_" + std::to_string(i - 1) + " (c_" + std::to_string(i) +
                          " <= c_" + std::to_string(i + 1) + ", docs/formats.md, \"Carried bytes\"); it has no ending carry to move");
      moved.on_host_ms[i] = offload_copy(p, data_ms, bytes);
      moved.out[i] = 1;
    } else {
      if (!moved.out[i])
        return op_label(ops_, p) + ": " + what_is() + " not on the host (" + (own ? "offload_input" : "offload_carried") + " it first)";
      moved.ready_ms[i] = prefetch_copy(p, moved.on_host_ms[i], bytes);
      moved.out[i] = 0;
    }
    return {};
  }
  // OpKind::WaitOffloads. Note [Waiting for the offloads]: the d2h link runs its copies
  // in issue order, so the last one issued ends last. Nothing is allocated, so
  // op_start_ms stays -1.
  s.stall_added = std::max(0.0, s.d2h_free - s.compute_end);
  s.out.stall_ms += s.stall_added;
  s.compute_end = std::max(s.compute_end, s.d2h_free);
  return {};
}

std::string Timeline::compute(int p) {
  TimelineState& s = s_;
  Residency& r = s.r;
  const Op& op = ops_[p];
  const int i = op.index, L = L_;
  if (std::string e = check_needs(chain_, r, ops_, p); !e.empty()) return e;
  // An a_{i+1} on the host still exists: computing it again would leave two copies
  // once it is prefetched (and ā_{i+1} next to a plain a_{i+1}, which docs/formats.md,
  // "Operations and memory without offload: the sequential simulator" never has).
  if (is_forward(op.kind) && s.place[i + 1] == Place::OnHost)
    return op_label(ops_, p) + ": a_" + std::to_string(i + 1) + " is on the host; prefetch it instead of computing it again";
  // bwd i-1 needs a_i too, but comes after bwd i, which needs it back.
  if (op.kind == OpKind::Bwd && s.inputs.is_out(i))
    return op_label(ops_, p) + ": needs a_" + std::to_string(i) + ", whose own bytes are on the host (prefetch_input " + std::to_string(i) + " first)";
  if (op.kind == OpKind::Bwd && s.carries.is_out(i))
    return op_label(ops_, p) + ": needs a_" + std::to_string(i) + ", whose ending carry is on the host (prefetch_carried " + std::to_string(i) + " first)";
  if (op.kind == OpKind::Bwd && s.hollow[i + 1])
    return op_label(ops_, p) + ": needs all of ā_" + std::to_string(i + 1) + ", whose saved state is on the host (prefetch_saved " + std::to_string(i + 1) + " first)";

  // A compute op waits for every plain activation it reads that is still arriving.
  double ready = s.compute_end;
  const auto wait_for = [&](int k) { if (r.plain[k]) ready = std::max(ready, s.ready_ms[k]); };
  const ComputeCost cost = compute_cost(chain_, op, s.back_to_back.next(op));
  wait_for(cost.reads);
  if (op.kind == OpKind::Bwd) {
    ready = std::max(ready, s.saved_ready_ms[i + 1]);  // a prefetch_saved still in flight
    ready = std::max({ready, s.inputs.ready(i), s.carries.ready(i)});  // or a prefetch_input / _carried
  }
  // What the new object shares with what is already there (Note [Carried bytes]).
  const int64_t shared_bytes = op.kind == OpKind::Bwd    ? gradient_overlap(chain_, r, i)
                               : op.kind == OpKind::Loss ? gradient_overlap(chain_, r, L)
                                                         : activation_overlap(chain_, r, i + 1);
  const int64_t add_bytes = cost.add_bytes - shared_bytes, tmp_bytes = cost.tmp_bytes;
  const double dur_ms = cost.dur_ms;
  int64_t remove_bytes = 0;
  const double start = ready;
  const double end = start + dur_ms;
  if (s.keeps_op_times) s.op_start_ms[p] = start;
  s.stall_added = start - s.compute_end;
  s.out.stall_ms += s.stall_added;
  s.compute_end = end;
  s.compute_left_ms -= dur_ms;
  s.latest_implied_end_ms = std::max(s.latest_implied_end_ms, end + s.compute_left_ms);
  if (stops_.timed() && end + s.compute_left_ms > stops_.late_ms()) {
    stopped_late_ = true;
    return "ends after the bound on its time";
  }
  if (record_event({start, 2 * static_cast<int64_t>(p), add_bytes + tmp_bytes, p})) {
    s.over = true;
    return {};
  }

  switch (op.kind) {
    case OpKind::FwdKeep:
      r.saved[i + 1] = 1;
      s.saved_ready_ms[i + 1] = end;
      break;
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop:
      r.plain[i + 1] = 1;
      s.place[i + 1] = Place::Device;
      s.ready_ms[i + 1] = end;
      if (op.kind == OpKind::FwdDrop) {
        r.plain[i] = 0;
        s.place[i] = Place::None;
        remove_bytes += chain_.x(i) - activation_overlap(chain_, r, i);
      }
      break;
    case OpKind::Loss:
      r.grad[L] = 1;
      if (r.plain[L]) {
        r.plain[L] = 0;
        s.place[L] = Place::None;
        remove_bytes += chain_.x(L) - activation_overlap(chain_, r, L);
      }
      break;
    case OpKind::Bwd:
      r.grad[i] = 1;
      r.grad[i + 1] = 0;
      remove_bytes += chain_.x(i + 1) - gradient_overlap(chain_, r, i + 1);
      r.saved[i + 1] = 0;
      remove_bytes += chain_.xbar(i + 1) - activation_overlap(chain_, r, i + 1);
      if (r.plain[i]) {
        r.plain[i] = 0;
        s.place[i] = Place::None;
        remove_bytes += chain_.x(i) - activation_overlap(chain_, r, i);
      }
      break;
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::OffloadInput:
    case OpKind::PrefetchInput:
    case OpKind::OffloadCarried:
    case OpKind::PrefetchCarried:
    case OpKind::WaitOffloads:  // copies and waits: Timeline::copy
      break;
  }
  record_event({end, 2 * static_cast<int64_t>(p) + 1, -(tmp_bytes + remove_bytes), -1});
  return {};
}

bool Timeline::step(SimResult& result) {
  TimelineState& s = s_;
  const int p = s.ran;
  if (s.over) {
    result = stopped(p - 1);
    return false;
  }
  if (s.keeps_op_times) {
    s.op_start_ms.push_back(-1.0);
    s.offload_end_ms.push_back(-1.0);
  }
  s.copy_added = s.stall_added = -1;
  const bool is_copy_or_wait = !info(ops_[p].kind).is_compute;
  if (std::string e = is_copy_or_wait ? copy(p) : compute(p); !e.empty()) {
    result = fail(p, std::move(e));
    if (stopped_late_) result.stopped_late = true;
    return false;
  }
  ++s.ran;
  if (!is_copy_or_wait && s.over) {  // a compute op's start put the plan surely over
    result = stopped(p);
    return false;
  }
  return true;
}

// SimResult::offload_done_before from each op's start (-1: it allocates nothing) and each
// offload's copy end (-1: none). A copy ending exactly as an op starts frees its bytes
// first (event order). Offload ops allocate nothing: they never need to wait. The d2h
// link ends its copies in issue order, so an op that allocates before one offload's
// end does so before every later one's too: the search for the next offload's op goes
// on from where this one's ended.
std::vector<int> offload_done_before(const std::vector<double>& op_start_ms, const std::vector<double>& offload_end_ms) {
  const int n = static_cast<int>(op_start_ms.size());
  std::vector<int> done(n, -1);
  int q = 0;
  double last_end_ms = -1;
  for (int p = 0; p < n; ++p) {
    const double end_ms = offload_end_ms[p];
    if (end_ms < 0) continue;
    if (end_ms < last_end_ms) q = 0;  // never, but then from the start
    last_end_ms = end_ms;
    q = std::max(q, p + 1);
    while (q < n && !(op_start_ms[q] >= 0 && op_start_ms[q] >= end_ms)) ++q;
    if (q < n) done[p] = q;
  }
  return done;
}

// Events apply in (time, order) order (Note [Events in time order]).
bool event_before(const MemEvent& a, const MemEvent& b) {
  return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.order < b.order;
}

// Visits `events` and the first `num_frees` of `frees`, each run already in event
// order, together in event order (Note [Events in time order]).
template <typename Visit>
void walk_in_event_order(const std::vector<MemEvent>& events, const std::vector<MemEvent>& frees, size_t num_frees,
                         Visit visit) {
  size_t next_free = 0;
  for (const MemEvent& e : events) {
    while (next_free < num_frees && event_before(frees[next_free], e)) visit(frees[next_free++]);
    visit(e);
  }
  while (next_free < num_frees) visit(frees[next_free++]);
}

// The device total along such a walk, and the highest it reaches (the first event
// that reaches it names the op), into `out`'s peak.
struct PeakFold {
  SimResult& out;
  int64_t total = 0;
  void operator()(const MemEvent& e) {
    total += e.delta_bytes;
    if (total > out.peak_bytes) { out.peak_bytes = total; out.peak_op = e.op; }
  }
};

// The fold of `s`'s walk so far, from what settle() folded out of it.
PeakFold settled_fold(const TimelineState& s, SimResult& out) {
  out.peak_bytes = s.settled_peak_bytes;
  out.peak_op = s.settled_peak_op;
  return PeakFold{out, s.settled_total};
}

// Note [The walk's settled start]
// finish() folds the events and the frees in event order into the peak, so a state
// keeps every one of them, and a TimelinePrefix copies its state, hundreds of ops of
// them, into each candidate's run: on long plans, most of what a candidate that runs
// a few ops costs. But every event and free a later op makes is at the compute cursor
// or after it (a compute op starts there at the earliest, a prefetch allocates there,
// a copy ends after it starts), so the start of the walk up to the first element at
// the cursor is final: settle() folds it, in finish()'s order, into a total and a
// peak and drops it from the lists, and finish() and a rejoining run go on from
// there. The last event stays, for the time-order check of the next. Only a state
// whose events are in time order (finish() would sort them otherwise) and whose frees
// are (they are: the link ends its copies in issue order) is settled. The result is
// the same, bit for bit: the same additions in the same order.
void settle(TimelineState& s) {
  if (!s.in_time_order || s.events.size() < 2 || !std::is_sorted(s.frees.begin(), s.frees.end(), event_before))
    return;
  const double cutoff = s.compute_end;
  const size_t last = s.events.size() - 1;
  SimResult peak;
  PeakFold fold = settled_fold(s, peak);
  size_t e = 0, f = 0;
  for (;;) {
    if (f < s.frees.size() && event_before(s.frees[f], s.events[e])) {
      if (!(s.frees[f].time_ms < cutoff)) break;
      fold(s.frees[f++]);
    } else {
      if (e == last || !(s.events[e].time_ms < cutoff)) break;
      fold(s.events[e++]);
    }
  }
  if (e == 0 && f == 0) return;
  s.events.erase(s.events.begin(), s.events.begin() + static_cast<std::ptrdiff_t>(e));
  s.frees.erase(s.frees.begin(), s.frees.begin() + static_cast<std::ptrdiff_t>(f));
  s.settled_total = fold.total;
  s.settled_peak_bytes = peak.peak_bytes;
  s.settled_peak_op = peak.peak_op;
}

SimResult Timeline::finish() {
  TimelineState& s = s_;
  const int n = static_cast<int>(ops_.size()), L = L_;
  if (s.over) return stopped(n - 1);
  for (int k = 0; k <= L; ++k) {
    if (s.place[k] == Place::OnHost) return fail(n, "a_" + std::to_string(k) + " was offloaded and never prefetched");
    if (s.hollow[k]) return fail(n, "the saved state of ā_" + std::to_string(k) + " was offloaded and never prefetched");
    if (s.inputs.is_out(k)) return fail(n, "a_" + std::to_string(k) + "'s own bytes were offloaded and never prefetched");
    if (s.carries.is_out(k)) return fail(n, "a_" + std::to_string(k) + "'s ending carry was offloaded and never prefetched");
  }
  if (std::string e = check_end(chain_, s.r); !e.empty()) return fail(n, e);

  // Note [Events in time order]
  // Events apply in (time, order) order, ties kept in the order they were made. The
  // compute ops' starts and ends and the prefetches' allocations are made in program
  // order, which is already that order: each starts no earlier than the op before it
  // ended, a prefetch allocates when the compute op before it ends, and `order` grows
  // with the op. Only the frees at the ends of offload copies, made when the copy is
  // issued, are not, and no event of the other kind has their `order`. So the frees
  // alone are sorted and the two runs are walked together: the order of one stable
  // sort of all the events, which cost the polish about a tenth of its time.
  const auto before = event_before;
  SimResult out = s.out;
  std::vector<MemEvent>& frees = s.frees;
  std::vector<MemEvent>& events = s.events;
  // The frees come sorted too: the d2h link ends its copies in issue order.
  if (!std::is_sorted(frees.begin(), frees.end(), before)) std::stable_sort(frees.begin(), frees.end(), before);
  if (!std::is_sorted(events.begin(), events.end(), before)) std::stable_sort(events.begin(), events.end(), before);
  walk_in_event_order(events, frees, frees.size(), settled_fold(s, out));  // Note [The walk's settled start]
  out.time_ms = std::max(s.compute_end, s.last_copy_end);
  if (s.keeps_op_times) out.offload_done_before = offload_done_before(s.op_start_ms, s.offload_end_ms);
  out.valid = true;
  return out;
}

// Runs ops s.ran .. end on `s`, then finishes.
SimResult run_rest(const Chain& chain, const std::vector<Op>& ops, const Stops& stops, TimelineState& s) {
  Timeline timeline(chain, ops, stops, s);
  SimResult result;
  while (s.ran < static_cast<int>(ops.size()))
    if (!timeline.step(result)) return result;
  return timeline.finish();
}

}  // namespace

ComputeCost compute_cost(const Chain& chain, const Op& op, bool back_to_back) {
  const int i = op.index, L = chain.length();
  switch (op.kind) {
    case OpKind::FwdKeep: return {chain.xbar(i + 1), chain.ftmp_keep(i), chain.uf(i), i};
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop: return {chain.x(i + 1), chain.ftmp(i), chain.uf_nograd(i), i};
    case OpKind::Loss: return {chain.x(L), chain.btmp(L), chain.ub(L), L};
    case OpKind::Bwd: return {chain.x(i), chain.btmp(i), back_to_back ? chain.ub_after_keep(i) : chain.ub(i), i};
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::OffloadInput:
    case OpKind::PrefetchInput:
    case OpKind::OffloadCarried:
    case OpKind::PrefetchCarried:
    case OpKind::WaitOffloads:
      return {};  // not a compute op
  }
  return {};
}

int compute_reads(const Chain& chain, const Op& op) { return compute_cost(chain, op, false).reads; }

double compute_only_ms(const Chain& chain, const std::vector<Op>& ops) {
  double end_ms = 0;
  BackToBack back_to_back;
  for (const Op& op : ops)
    if (info(op.kind).is_compute) end_ms = end_ms + compute_cost(chain, op, back_to_back.next(op)).dur_ms;
  return end_ms;
}

// Note [Stopping over the budget]
// A search that keeps only plans within a budget (the pipelined family, the polish
// once its plan fits) simulates many that are not, and learns it only from the
// peak, found after the whole plan has run. The device total at an event is the sum
// of every program-order event up to it and of the copy-end frees that came before it
// in time. Every free issued so far is counted as done: a free issued later in
// program order ends after the copy it follows starts, no earlier than this event,
// and frees only lower the total. So that sum is never above the total, and once it
// exceeds the bound the peak surely does: the simulation stops there. Events are made
// in time order (Note [Events in time order]); should one not be, nothing stops.
// Likewise for time: once a compute op ends, the plan ends no earlier than that plus
// the durations of the compute ops still to run (a stall only adds), so where that
// exceeds a bound by more than rounding could explain (a billionth), the plan surely
// ends later, and the simulation stops.

SimResult simulate_timeline(const Chain& chain, const std::vector<Op>& ops, int64_t stop_above_bytes,
                            double stop_after_ms, std::optional<double> known_compute_ms) {
  thread_local TimelineState state;  // Note [The timeline's buffers]
  const Stops stops{stop_above_bytes, stop_after_ms};
  state.start(chain, !stops.timed() ? 0.0 : known_compute_ms ? *known_compute_ms : compute_only_ms(chain, ops));
  return run_rest(chain, ops, stops, state);
}

// Note [Resuming from a shared prefix]
// The polish's candidates each change its plan at one place, and the ops before it are
// the plan's own, so simulating each from the first op repeats, candidate after
// candidate, the same prefix: most of the polish's time. The simulator is a state
// machine over the ops, so a TimelinePrefix keeps its state after a prefix of the base
// plan and runs each candidate from there: from the first op where the two differ,
// forward along the base when its passes scan left to right, back to the start
// otherwise. The result is the one simulate_timeline gives, bit for bit: the same
// state after the same ops, then the same steps. Two things depend on the bounds,
// which the base's own run does not have: whether the candidate would already have
// stopped inside the prefix (the state keeps the highest sum and the latest implied
// end the stopping tests saw: where either passes the candidate's bound, it is
// simulated from the first op instead), and the compute time still to run, which the
// prefix counts down from the same total (so candidates must have the base's compute
// ops: Note [One compute total per search] in polish.h). A prefix too short to pay
// for copying the state is simulated from the first op too.

// Note [Runs that rejoin the base]
// Past the ops where a candidate differs from the base, the two run the same ops (the
// base's own suffix, each op some places on or back), and once the candidate's state
// is the base's at the same op, all that follows happens in both alike: the same ops
// start and end at the same instants and hold the same bytes. Most of the polish's
// candidates change their plan at one place and rejoin the base a few ops later (a
// copy moved within its slack, a wait for a link already idle), yet a run goes on to
// the plan's end, and on long plans that end is most of the run. So a TimelinePrefix
// made to rejoin runs its base once to the end, keeping its state every kRejoinEvery
// ops, and a candidate's run stops where its state is the same as one of those; the
// rest of its result comes from the base's run. "The same" is everything that decides
// what follows: the residency and the places, bit for bit; the compute cursor, the
// compute time still to run, the byte sums, the copies still running and their frees;
// and every time that a later op may read, where that time is after the cursor. A time
// at or before it acts as the cursor itself, since every later read takes the max with
// a cursor no earlier (a copy starts at max(cursor, data, link free), a compute op at
// max(cursor, its input's arrival)). From there:
//  - time_ms is the base's: both end with the same last op or copy;
//  - copy_ms and stall_ms go on from the candidate's own sums by the addends the base's
//    ops added, in their order: the very sums a whole run makes, bit for bit;
//  - the peak: the events up to the cursor and the frees that end by it are the
//    candidate's own, the others the base's, and each of the first comes before each of
//    the second in event order (Note [Events in time order]: no later event starts
//    before the cursor, and a free at the cursor goes first); so the candidate's own
//    walk up to there, then the base's highest total after the same point where it is
//    higher, give the peak and its op;
//  - where the candidate's bounds (Note [Stopping over the budget]) would stop it later
//    -- a sum or an end the base's stopping tests saw after that point passes them --
//    it runs on instead.
// So the result is still simulate_timeline's, bit for bit (tested with and without
// rejoining). The base's run and states cost one run per new base; a search that
// simulates only one candidate per base (the pipelined family) does not ask for it.
//
// Note [Op times only for whole simulations]
// SimResult::offload_done_before comes from each op's start and each copy's end, one
// entry per op, and only the runtime reads it, from a plan's whole simulation
// (runtime/copy_plan.cpp). A search's candidates are compared by their peak, time and
// copies, so a TimelinePrefix's states keep no op times and its results leave
// offload_done_before empty: a candidate's run copies no op times from the prefix and
// builds none from the base's.

namespace {

// A time that ops after the compute cursor `at_ms` may read: at or before it, only that.
double not_before(double t_ms, double at_ms) { return std::max(t_ms, at_ms); }
bool same_times(const std::vector<double>& a, const std::vector<double>& b, double at_ms) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (not_before(a[k], at_ms) != not_before(b[k], at_ms)) return false;
  return true;
}
bool same_moved(const MovedBytes& a, const MovedBytes& b, size_t n, double at_ms) {
  if (!a.used && !b.used) return true;
  for (size_t k = 0; k < n; ++k) {
    const double a_host = a.used ? a.on_host_ms[k] : 0.0, b_host = b.used ? b.on_host_ms[k] : 0.0;
    if (a.is_out(static_cast<int>(k)) != b.is_out(static_cast<int>(k)) ||
        not_before(a.ready(static_cast<int>(k)), at_ms) != not_before(b.ready(static_cast<int>(k)), at_ms) ||
        not_before(a_host, at_ms) != not_before(b_host, at_ms))
      return false;
  }
  return true;
}
// Where the frees of the copies that end after `at_ms` begin: the d2h link ends its
// copies in issue order, so they are the last ones.
size_t first_pending_free(const std::vector<MemEvent>& frees, double at_ms) {
  size_t i = frees.size();
  while (i > 0 && frees[i - 1].time_ms > at_ms) --i;
  return i;
}
// Whether everything after the two states happens alike (Note [Runs that rejoin the base]).
bool same_future(const TimelineState& c, const TimelineState& b) {
  const double at = c.compute_end;
  if (at != b.compute_end || c.compute_left_ms != b.compute_left_ms || c.program_bytes != b.program_bytes ||
      c.freed_bytes != b.freed_bytes || c.over || b.over || !c.in_time_order || !b.in_time_order ||
      !(c.back_to_back == b.back_to_back) || not_before(c.d2h_free, at) != not_before(b.d2h_free, at) ||
      not_before(c.h2d_free, at) != not_before(b.h2d_free, at) ||
      not_before(c.last_copy_end, at) != not_before(b.last_copy_end, at))
    return false;
  const size_t cf = first_pending_free(c.frees, at), bf = first_pending_free(b.frees, at);
  if (c.frees.size() - cf != b.frees.size() - bf) return false;
  for (size_t i = 0; cf + i < c.frees.size(); ++i)
    if (c.frees[cf + i].time_ms != b.frees[bf + i].time_ms || c.frees[cf + i].delta_bytes != b.frees[bf + i].delta_bytes)
      return false;
  return c.r.plain == b.r.plain && c.r.saved == b.r.saved && c.r.grad == b.r.grad && c.place == b.place &&
         c.hollow == b.hollow && same_times(c.ready_ms, b.ready_ms, at) && same_times(c.on_host_ms, b.on_host_ms, at) &&
         same_times(c.saved_ready_ms, b.saved_ready_ms, at) && same_times(c.saved_on_host_ms, b.saved_on_host_ms, at) &&
         same_moved(c.inputs, b.inputs, c.place.size(), at) && same_moved(c.carries, b.carries, c.place.size(), at);
}

constexpr int kRejoinEvery = 32;  // ops of the base between two kept states

// The base's whole run, for the candidates that rejoin it.
struct BaseRun {
  bool usable = false;  // valid, its events in time order
  SimResult result;
  // After k * kRejoinEvery ops, k = 0, 1, ...: the state, its history dropped but for
  // the frees still to come, and where the base's event walk goes on from there.
  std::vector<TimelineState> at;
  std::vector<size_t> walk_at;
  // Per op: what it added to copy_ms and stall_ms (-1: nothing), as in TimelineState.
  std::vector<double> copy_added, stall_added;
  // From op k on: the highest sum and the latest implied end the stopping tests saw.
  std::vector<int64_t> most_bytes_from;
  std::vector<double> latest_end_from;
  // The event walk of finish(): the total after each element; from each element on,
  // the highest total and the op of the first element that reaches it.
  std::vector<int64_t> walk_total, best_from;
  std::vector<int> best_op_from;
};

// What a TimelinePrefix keeps for rejoining: its base's run, made when first needed.
struct Rejoin {
  std::optional<BaseRun> base_run;
  int64_t rejoins = 0;  // runs that ended by rejoining
};

BaseRun run_base(const Chain& chain, const std::vector<Op>& base, double compute_ms) {
  BaseRun j;
  const int n = static_cast<int>(base.size());
  TimelineState s;
  s.start(chain, compute_ms, /*keep_op_times=*/false);  // Note [Op times only for whole simulations]
  const Stops none;
  Timeline timeline(chain, base, none, s);
  std::vector<int64_t> most_bytes(n, std::numeric_limits<int64_t>::min());
  std::vector<double> latest_end(n, -std::numeric_limits<double>::infinity());
  std::vector<size_t> events_at;
  for (int p = 0; p < n; ++p) {
    if (p % kRejoinEvery == 0) {
      TimelineState kept = s;
      kept.events.clear();
      kept.frees.erase(kept.frees.begin(),
                       kept.frees.begin() + static_cast<std::ptrdiff_t>(first_pending_free(kept.frees, kept.compute_end)));
      j.at.push_back(std::move(kept));
      events_at.push_back(s.events.size());
    }
    const size_t events_before = s.events.size();
    int64_t sum = s.program_bytes + s.freed_bytes;  // a copy op moves freed_bytes but records no event
    SimResult failed;
    if (!timeline.step(failed)) return j;  // an invalid base: nothing rejoins it
    for (size_t i = events_before; i < s.events.size(); ++i) {
      sum += s.events[i].delta_bytes;
      most_bytes[p] = std::max(most_bytes[p], sum);
    }
    if (info(base[p].kind).is_compute) latest_end[p] = s.compute_end + s.compute_left_ms;
    j.copy_added.push_back(s.copy_added);
    j.stall_added.push_back(s.stall_added);
  }
  j.result = timeline.finish();  // which leaves the frees in event order
  if (!j.result.valid || !s.in_time_order) return j;
  const std::vector<MemEvent>& frees = s.frees;
  j.most_bytes_from.assign(n + 1, std::numeric_limits<int64_t>::min());
  j.latest_end_from.assign(n + 1, -std::numeric_limits<double>::infinity());
  for (int p = n - 1; p >= 0; --p) {
    j.most_bytes_from[p] = std::max(j.most_bytes_from[p + 1], most_bytes[p]);
    j.latest_end_from[p] = std::max(j.latest_end_from[p + 1], latest_end[p]);
  }
  // finish()'s walk, element by element.
  std::vector<int> op_of;
  int64_t total = 0;
  walk_in_event_order(s.events, frees, frees.size(), [&](const MemEvent& e) {
    total += e.delta_bytes;
    j.walk_total.push_back(total);
    op_of.push_back(e.op);
  });
  const size_t w = j.walk_total.size();
  j.best_from.assign(w + 1, std::numeric_limits<int64_t>::min());
  j.best_op_from.assign(w + 1, -1);
  for (size_t i = w; i-- > 0;) {
    const bool here = j.walk_total[i] >= j.best_from[i + 1];  // ties: the first element reaching it
    j.best_from[i] = here ? j.walk_total[i] : j.best_from[i + 1];
    j.best_op_from[i] = here ? op_of[i] : j.best_op_from[i + 1];
  }
  for (size_t k = 0; k < j.at.size(); ++k) {
    const double at_ms = j.at[k].compute_end;
    const auto ended = std::upper_bound(frees.begin(), frees.end(), at_ms,
                                        [](double t, const MemEvent& f) { return t < f.time_ms; });
    j.walk_at.push_back(events_at[k] + static_cast<size_t>(ended - frees.begin()));
  }
  j.usable = true;
  return j;
}

// The result of a run in state `c`, which is the base's after k of its ops; the
// candidate's ops are `shift` more than the base's.
std::optional<SimResult> rejoined(const BaseRun& j, int n_base, const TimelineState& c, int k, int shift,
                                  const Stops& stops) {
  if (j.most_bytes_from[k] > stops.above_bytes || (stops.timed() && j.latest_end_from[k] > stops.late_ms()))
    return std::nullopt;  // it would stop later: run on
  SimResult out = c.out;
  for (int p = k; p < n_base; ++p) {
    if (j.copy_added[p] >= 0) out.copy_ms += j.copy_added[p];
    if (j.stall_added[p] >= 0) out.stall_ms += j.stall_added[p];
  }
  // The candidate's own walk up to the cursor, as finish() walks it.
  PeakFold own = settled_fold(c, out);  // Note [The walk's settled start]
  walk_in_event_order(c.events, c.frees, first_pending_free(c.frees, c.compute_end), [&](const MemEvent& e) { own(e); });
  const size_t w = j.walk_at[static_cast<size_t>(k / kRejoinEvery)];
  if (own.total != (w == 0 ? 0 : j.walk_total[w - 1])) return std::nullopt;  // never: the same bytes are held
  if (j.best_from[w] > out.peak_bytes) {
    out.peak_bytes = j.best_from[w];
    out.peak_op = j.best_op_from[w] >= 0 ? j.best_op_from[w] + shift : j.best_op_from[w];
  }
  out.time_ms = j.result.time_ms;
  out.valid = true;
  return out;
}

// run_rest, stopping where the run rejoins the base's (`j` given).
SimResult run_rejoining(const Chain& chain, const std::vector<Op>& base, double compute_ms, Rejoin* j,
                        const std::vector<Op>& ops, const Stops& stops, TimelineState& run) {
  if (!j) return run_rest(chain, ops, stops, run);
  const int n = static_cast<int>(ops.size()), n_base = static_cast<int>(base.size());
  int suffix = 0;  // ops[from ..] == base[from - shift ..]
  while (suffix < n && suffix < n_base && ops[n - 1 - suffix] == base[n_base - 1 - suffix]) ++suffix;
  const int from = n - suffix, shift = n - n_base;
  Timeline timeline(chain, ops, stops, run);
  SimResult result;
  while (run.ran < n) {
    const int k = run.ran - shift;  // the base's op count at this point of the candidate
    if (run.ran >= from && k > 0 && k < n_base && k % kRejoinEvery == 0) {
      if (!j->base_run) j->base_run = run_base(chain, base, compute_ms);
      const BaseRun& b = *j->base_run;
      if (b.usable && same_future(run, b.at[static_cast<size_t>(k / kRejoinEvery)]))
        if (std::optional<SimResult> r = rejoined(b, n_base, run, k, shift, stops)) {
          ++j->rejoins;
          return std::move(*r);
        }
    }
    if (!timeline.step(result)) return result;
  }
  return timeline.finish();
}

// A TimelinePrefix's state from the first op: no op times (Note [Op times only for whole
// simulations]).
void start_for_search(TimelineState& s, const Chain& chain, double compute_ms) {
  s.start(chain, compute_ms, /*keep_op_times=*/false);
}

}  // namespace

// Note [Going back along the base]
// The polish's passes scan the plan left to right, but not every candidate of one
// position differs from the base where the one before it did: a copy moved two places
// back differs two ops earlier than one moved one place on, so the state, already past
// that op, went back to the first op and ran up to it again: each such candidate paid
// for the whole prefix, a large share of all the steps a polish ran. So the state
// is also kept, settled (Note [The walk's settled start]), every kPrefixStateEvery ops
// of the base, and going back starts from the last kept state at or before the first
// op that differs. A state after k ops of the base depends only on those ops (and the
// compute total, the same for every plan: Note [One compute total per search] in
// polish.h), so a new base keeps the states up to its first changed op. Settling
// changes no result (the same Note), so the result is the same, bit for bit.
constexpr int kPrefixStateEvery = 16;

struct TimelinePrefix::State {
  TimelineState at;  // after at.ran ops of base
  std::vector<TimelineState> kept;  // kept[i]: after (i + 1) * kPrefixStateEvery ops of base
  std::optional<Rejoin> rejoin;  // Note [Runs that rejoin the base], when asked for
  int64_t back_to_kept = 0;  // times `at` went back to a kept state rather than the first op

  // Puts `at` back to the last kept state after at most `ops` ops of the base.
  void back_to(int ops, const Chain& chain, double compute_ms) {
    const size_t usable = std::min(kept.size(), static_cast<size_t>(ops / kPrefixStateEvery));
    if (usable == 0) {
      start_for_search(at, chain, compute_ms);
    } else {
      at = kept[usable - 1];
      ++back_to_kept;
    }
  }
  // Keeps `at` where it has just reached the next state to keep.
  void keep_at() {
    if (at.ran % kPrefixStateEvery != 0 || at.ran / kPrefixStateEvery != static_cast<int>(kept.size()) + 1) return;
    settle(at);
    kept.push_back(at);
  }
};

TimelinePrefix::TimelinePrefix(const Chain& chain, std::vector<Op> base, double compute_ms, bool rejoin)
    : chain_(chain), base_(std::move(base)), compute_ms_(compute_ms), state_(std::make_unique<State>()) {
  start_for_search(state_->at, chain_, compute_ms_);
  if (rejoin) state_->rejoin.emplace();
}
TimelinePrefix::~TimelinePrefix() = default;

int64_t TimelinePrefix::rejoins() const { return state_->rejoin ? state_->rejoin->rejoins : 0; }
int64_t TimelinePrefix::back_to_kept() const { return state_->back_to_kept; }

void TimelinePrefix::rebase(std::vector<Op> base) {
  const auto differ = std::mismatch(base_.begin(), base_.end(), base.begin(), base.end());
  const auto same = static_cast<int>(differ.first - base_.begin());
  base_ = std::move(base);
  // Note [Going back along the base]: the states after the ops both bases share stay.
  state_->kept.resize(std::min(state_->kept.size(), static_cast<size_t>(same / kPrefixStateEvery)));
  if (same < state_->at.ran) state_->back_to(same, chain_, compute_ms_);
  if (state_->rejoin) state_->rejoin->base_run.reset();
}

SimResult TimelinePrefix::simulate(const std::vector<Op>& ops, int64_t stop_above_bytes, double stop_after_ms) {
  thread_local TimelineState run;  // Note [The timeline's buffers]
  const Stops stops{stop_above_bytes, stop_after_ms};
  Rejoin* j = state_->rejoin ? &*state_->rejoin : nullptr;
  const auto from_the_start = [&] {
    start_for_search(run, chain_, compute_ms_);
    return run_rejoining(chain_, base_, compute_ms_, j, ops, stops, run);
  };
  const auto differ = std::mismatch(base_.begin(), base_.end(), ops.begin(), ops.end());
  const auto same = static_cast<int>(differ.first - base_.begin());
  TimelineState& at = state_->at;
  if (same < kShortestPrefixOps) return from_the_start();
  if (same < at.ran) state_->back_to(same, chain_, compute_ms_);  // Note [Going back along the base]
  // Whether the candidate stops inside the ops run so far: then it is simulated from
  // the first op, which stops no later than here.
  const auto stops_inside = [&] {
    return at.most_in_order_bytes > stops.above_bytes || (stops.timed() && at.latest_implied_end_ms > stops.late_ms());
  };
  if (at.ran < same) {
    // Along the base, which is valid, with no bounds: the state the candidate reaches.
    const Stops none;
    Timeline timeline(chain_, base_, none, at);
    SimResult failed;
    while (at.ran < same && !stops_inside()) {
      if (!timeline.step(failed)) {  // an invalid base: nothing to resume from
        start_for_search(at, chain_, compute_ms_);
        state_->kept.clear();
        return from_the_start();
      }
      state_->keep_at();
    }
  }
  if (stops_inside()) return from_the_start();
  settle(at);  // Note [The walk's settled start]: what `run` copies is what is still to come
  run = at;
  return run_rejoining(chain_, base_, compute_ms_, j, ops, stops, run);
}

}  // namespace memopt::solver

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
  for (int p = 0; p < static_cast<int>(ops.size()); ++p) {
    const Op& op = ops[p];
    if (needs_timeline(op.kind))
      return fail(out, p, op_label(ops, p) + ": copies and waits need the timeline simulator (docs/formats.md, \"Offload: the timeline simulator\")");
    if (std::string e = check_needs(chain, r, ops, p); !e.empty()) return fail(out, p, e);
    const int i = op.index;
    switch (op.kind) {
      case OpKind::FwdKeep:
        resident += chain.xbar(i + 1) - activation_overlap(chain, r, i + 1);
        r.saved[i + 1] = 1;
        reach(resident + chain.ftmp_keep(i), p);
        time_ms += chain.uf(i);
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        resident += chain.x(i + 1) - activation_overlap(chain, r, i + 1);
        r.plain[i + 1] = 1;
        reach(resident + chain.ftmp(i), p);
        time_ms += chain.uf_nograd(i);
        if (op.kind == OpKind::FwdDrop) { r.plain[i] = 0; resident -= chain.x(i) - activation_overlap(chain, r, i); }
        break;
      case OpKind::Loss:
        resident += chain.x(L) - gradient_overlap(chain, r, L);
        r.grad[L] = 1;
        reach(resident + chain.btmp(L), p);
        time_ms += chain.ub(L);
        if (r.plain[L]) { r.plain[L] = 0; resident -= chain.x(L) - activation_overlap(chain, r, L); }
        break;
      case OpKind::Bwd:
        resident += chain.x(i) - gradient_overlap(chain, r, i);
        r.grad[i] = 1;
        reach(resident + chain.btmp(i), p);
        time_ms += chain.ub(i);
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

// Note [The timeline's buffers]
// The polish simulates thousands of plans per solve, and allocating this state anew
// for each had cost about a tenth of its time; each thread keeps one set and
// simulate_timeline resets it (simulations never nest).
struct TimelineBuffers {
  Residency r;
  std::vector<Place> place;
  std::vector<double> ready_ms, on_host_ms, saved_ready_ms, saved_on_host_ms, op_start_ms, offload_end_ms;
  std::vector<char> hollow;
  std::vector<MemEvent> events, frees;
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
struct MovedBytesBuffers {
  MovedBytes inputs, carries;
};

}  // namespace

ComputeCost compute_cost(const Chain& chain, const Op& op) {
  const int i = op.index, L = chain.length();
  switch (op.kind) {
    case OpKind::FwdKeep: return {chain.xbar(i + 1), chain.ftmp_keep(i), chain.uf(i), i};
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop: return {chain.x(i + 1), chain.ftmp(i), chain.uf_nograd(i), i};
    case OpKind::Loss: return {chain.x(L), chain.btmp(L), chain.ub(L), L};
    case OpKind::Bwd: return {chain.x(i), chain.btmp(i), chain.ub(i), i};
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

double compute_only_ms(const Chain& chain, const std::vector<Op>& ops) {
  double end_ms = 0;
  for (const Op& op : ops)
    if (info(op.kind).is_compute) end_ms = end_ms + compute_cost(chain, op).dur_ms;
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
                            double stop_after_ms) {
  const int L = chain.length();
  const int n = static_cast<int>(ops.size());
  thread_local TimelineBuffers buffers;  // Note [The timeline's buffers]
  Residency& r = buffers.r;
  r.reset(L);
  r.plain[0] = 1;
  SimResult out;

  std::vector<Place>& place = buffers.place;
  place.assign(L + 2, Place::None);
  place[0] = Place::Device;
  std::vector<double>& ready_ms = buffers.ready_ms;      // when a_k's data is on the device
  std::vector<double>& on_host_ms = buffers.on_host_ms;  // when its offload ended
  ready_ms.assign(L + 2, 0.0);
  on_host_ms.assign(L + 2, 0.0);
  // ā_k beyond a_k (Note [Offloading saved state]): on the host while hollow, and
  // when it was last complete on the device / on the host.
  std::vector<char>& hollow = buffers.hollow;
  std::vector<double>& saved_ready_ms = buffers.saved_ready_ms;
  std::vector<double>& saved_on_host_ms = buffers.saved_on_host_ms;
  hollow.assign(L + 2, 0);
  saved_ready_ms.assign(L + 2, 0.0);
  saved_on_host_ms.assign(L + 2, 0.0);
  thread_local MovedBytesBuffers moved_buffers;  // Note [The timeline's buffers]
  MovedBytes& inputs = moved_buffers.inputs;
  MovedBytes& carries = moved_buffers.carries;
  inputs.used = carries.used = false;
  std::vector<MemEvent>& events = buffers.events;  // in program order (Note [Events in time order])
  std::vector<MemEvent>& frees = buffers.frees;    // at the ends of offload copies
  events.clear();
  frees.clear();
  events.push_back({0.0, -2, chain.x(0), -1});
  // Note [Stopping over the budget]: the program-order events' sum and every free so far.
  int64_t program_bytes = chain.x(0), freed_bytes = 0;
  bool in_time_order = true;
  // Records a program-order event; true once the plan surely holds more than the bound.
  const auto record_event = [&](const MemEvent& e) {
    in_time_order = in_time_order && e.time_ms >= events.back().time_ms;
    events.push_back(e);
    program_bytes += e.delta_bytes;
    return in_time_order && program_bytes + freed_bytes > stop_above_bytes;
  };
  // The compute time still to run, for stop_after_ms.
  const bool timed_stop = stop_after_ms < std::numeric_limits<double>::infinity();
  double compute_left_ms = timed_stop ? compute_only_ms(chain, ops) : 0.0;
  const double late_ms = stop_after_ms + 1e-9 * std::abs(stop_after_ms);
  const auto stopped = [&](int p) {
    out.stopped_over = true;
    out.peak_bytes = program_bytes + freed_bytes;
    return fail(out, p, "holds more than the bound on its bytes");
  };

  std::vector<double>& op_start_ms = buffers.op_start_ms;
  std::vector<double>& offload_end_ms = buffers.offload_end_ms;
  op_start_ms.assign(n, -1.0);
  offload_end_ms.assign(n, -1.0);
  double compute_end = 0;  // the compute cursor: end of the previous compute op
  double d2h_free = 0, h2d_free = 0, last_copy_end = 0;
  const auto need_link = [&](int p) -> std::string {
    if (!chain.link) return op_label(ops, p) + ": the profile has no `link` bandwidth, so it cannot offload; add one to the profile";
    return {};
  };
  // Section 5.2: op p copies `bytes`, complete on the device since `data_ms`, to the
  // host, and frees them when the copy ends (returned).
  const auto offload_copy = [&](int p, double data_ms, int64_t bytes) {
    const double start = std::max({compute_end, data_ms, d2h_free});
    const double end = start + 1000.0 * static_cast<double>(bytes) / chain.link->d2h_bytes_per_s;
    d2h_free = end;
    last_copy_end = std::max(last_copy_end, end);
    out.copy_ms += end - start;
    frees.push_back({end, -1, -bytes, -1});
    freed_bytes -= bytes;
    offload_end_ms[p] = end;
    return end;
  };
  // Op p allocates `bytes` at issue and copies them back from the host, where they
  // are since `on_host_ms`; returns when the copy ends.
  bool over = false;  // a prefetch's allocation put the plan surely over the bound
  const auto prefetch_copy = [&](int p, double on_host_ms, int64_t bytes) {
    over = record_event({compute_end, 2 * static_cast<int64_t>(p), bytes, p}) || over;
    op_start_ms[p] = compute_end;  // it allocates at issue
    const double start = std::max({compute_end, h2d_free, on_host_ms});
    const double end = start + 1000.0 * static_cast<double>(bytes) / chain.link->h2d_bytes_per_s;
    h2d_free = end;
    last_copy_end = std::max(last_copy_end, end);
    out.copy_ms += end - start;
    return end;
  };

  for (int p = 0; p < n; ++p) {
    if (over) return stopped(p - 1);
    const Op& op = ops[p];
    const int i = op.index;
    if (op.kind == OpKind::Offload) {
      if (std::string e = need_link(p); !e.empty()) return fail(out, p, e);
      if (i < 0 || i > L) return fail(out, p, op_label(ops, p) + ": index out of range for a chain of " + std::to_string(L) + " stages");
      if (!r.plain[i] || place[i] != Place::Device) {
        if (r.saved[i]) return fail(out, p, op_label(ops, p) + ": only plain activations can be offloaded, and a_" + std::to_string(i) + " is held as ā_" + std::to_string(i));
        return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i) + " is not resident on the device");
      }
      if (i < L && r.saved[i + 1])  // Note [A kept stage keeps its input]
        return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i) + " is the input of stage " + std::to_string(i) +
                                ", whose saved state ā_" + std::to_string(i + 1) + " is on the device and may hold it; " +
                                "offload it before fwd_keep " + std::to_string(i) + " or after bwd " + std::to_string(i) +
                                ", or move it with offload_input " + std::to_string(i));
      if (const int64_t shared = activation_overlap(chain, r, i); shared > 0)
        return fail(out, p, carried_copy_error(ops, p, shared));
      on_host_ms[i] = offload_copy(p, ready_ms[i], chain.x(i));
      place[i] = Place::OnHost;
      r.plain[i] = 0;
      continue;
    }
    if (op.kind == OpKind::Prefetch) {
      if (std::string e = need_link(p); !e.empty()) return fail(out, p, e);
      if (i < 0 || i > L) return fail(out, p, op_label(ops, p) + ": index out of range for a chain of " + std::to_string(L) + " stages");
      if (place[i] != Place::OnHost) return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i) + " is not on the host (offload it first)");
      if (const int64_t shared = activation_overlap(chain, r, i); shared > 0)
        return fail(out, p, carried_copy_error(ops, p, shared));
      ready_ms[i] = prefetch_copy(p, on_host_ms[i], chain.x(i));
      place[i] = Place::Device;
      r.plain[i] = 1;
      continue;
    }
    if (op.kind == OpKind::OffloadSaved || op.kind == OpKind::PrefetchSaved) {
      if (std::string e = need_link(p); !e.empty()) return fail(out, p, e);
      if (i < 1 || i > L)
        return fail(out, p, op_label(ops, p) + ": ā_" + std::to_string(i) + " does not exist; saved states are ā_1..ā_" + std::to_string(L));
      const int64_t bytes = chain.xbar(i) - chain.x(i);
      if (op.kind == OpKind::OffloadSaved) {
        if (!r.saved[i] || hollow[i])
          return fail(out, p, op_label(ops, p) + ": ā_" + std::to_string(i) + (r.saved[i] ? " is already on the host" : " is not resident (stage " + std::to_string(i - 1) + " must run fwd_keep first)"));
        saved_on_host_ms[i] = offload_copy(p, saved_ready_ms[i], bytes);
        hollow[i] = 1;
      } else {
        if (!r.saved[i] || !hollow[i])
          return fail(out, p, op_label(ops, p) + ": the saved state of ā_" + std::to_string(i) + " is not on the host (offload_saved it first)");
        saved_ready_ms[i] = prefetch_copy(p, saved_on_host_ms[i], bytes);
        hollow[i] = 0;
      }
      continue;
    }
    if (op.kind == OpKind::OffloadInput || op.kind == OpKind::PrefetchInput || op.kind == OpKind::OffloadCarried ||
        op.kind == OpKind::PrefetchCarried) {
      // Note [A kept stage's input may leave], Note [Carried bytes may leave] (simulate.h).
      if (std::string e = need_link(p); !e.empty()) return fail(out, p, e);
      if (i < 0 || i >= L)
        return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i) + " is the input of no stage; inputs are a_0..a_" + std::to_string(L - 1));
      const bool own = op.kind == OpKind::OffloadInput || op.kind == OpKind::PrefetchInput;
      const bool offload = op.kind == OpKind::OffloadInput || op.kind == OpKind::OffloadCarried;
      MovedBytes& moved = own ? inputs : carries;
      const auto what_is = [&] { return "a_" + std::to_string(i) + (own ? "'s own bytes are" : "'s ending carry is"); };
      const int64_t bytes = own ? chain.own_bytes(i) : chain.ending_carried_bytes(i);
      // a_first .. a_i hold the bytes; each of stages first .. i must have run fwd_keep.
      const int first = own ? i : chain.first_holder_of_ending_carry(i);
      moved.use(L);
      if (offload) {
        if (moved.out[i]) return fail(out, p, op_label(ops, p) + ": " + what_is() + " already on the host");
        double data_ms = moved.ready_ms[i];
        for (int m = first; m <= i; ++m) {
          if (!r.saved[m + 1])
            return fail(out, p, op_label(ops, p) + ": stage " + std::to_string(m) + " has not run fwd_keep, so a_" + std::to_string(m) +
                                    (own ? " is no kept stage's input (use offload " + std::to_string(m) + ")"
                                         : ", which holds part of a_" + std::to_string(i) + "'s ending carry, may still be read; move it once stages " +
                                               std::to_string(first) + ".." + std::to_string(i) + " have all run fwd_keep"));
          if (!(r.saved[m] || (r.plain[m] && place[m] == Place::Device)))
            return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(m) + " is not resident on the device");
          data_ms = std::max(data_ms, ready_ms[m]);
        }
        if (bytes <= 0)
          return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i) +
                                  (own ? " shares all its bytes with a neighbour (docs/formats.md, \"Carried bytes\"); it has nothing of its own to move"
                                       : " passes on every byte it carries from a_" + std::to_string(i - 1) + " (c_" + std::to_string(i) +
                                             " <= c_" + std::to_string(i + 1) + ", docs/formats.md, \"Carried bytes\"); it has no ending carry to move"));
        moved.on_host_ms[i] = offload_copy(p, data_ms, bytes);
        moved.out[i] = 1;
      } else {
        if (!moved.out[i])
          return fail(out, p, op_label(ops, p) + ": " + what_is() + " not on the host (" + (own ? "offload_input" : "offload_carried") + " it first)");
        moved.ready_ms[i] = prefetch_copy(p, moved.on_host_ms[i], bytes);
        moved.out[i] = 0;
      }
      continue;
    }
    if (op.kind == OpKind::WaitOffloads) {
      // Note [Waiting for the offloads]: the d2h link runs its copies in issue order,
      // so the last one issued ends last. Nothing is allocated, so op_start_ms stays -1.
      out.stall_ms += std::max(0.0, d2h_free - compute_end);
      compute_end = std::max(compute_end, d2h_free);
      continue;
    }
    if (std::string e = check_needs(chain, r, ops, p); !e.empty()) return fail(out, p, e);
    // An a_{i+1} on the host still exists: computing it again would leave two copies
    // once it is prefetched (and ā_{i+1} next to a plain a_{i+1}, which docs/formats.md,
    // "Operations and memory without offload: the sequential simulator" never has).
    if (is_forward(op.kind) && place[i + 1] == Place::OnHost)
      return fail(out, p, op_label(ops, p) + ": a_" + std::to_string(i + 1) + " is on the host; prefetch it instead of computing it again");
    // bwd i-1 needs a_i too, but comes after bwd i, which needs it back.
    if (op.kind == OpKind::Bwd && inputs.is_out(i))
      return fail(out, p, op_label(ops, p) + ": needs a_" + std::to_string(i) + ", whose own bytes are on the host (prefetch_input " + std::to_string(i) + " first)");
    if (op.kind == OpKind::Bwd && carries.is_out(i))
      return fail(out, p, op_label(ops, p) + ": needs a_" + std::to_string(i) + ", whose ending carry is on the host (prefetch_carried " + std::to_string(i) + " first)");
    if (op.kind == OpKind::Bwd && hollow[i + 1])
      return fail(out, p, op_label(ops, p) + ": needs all of ā_" + std::to_string(i + 1) + ", whose saved state is on the host (prefetch_saved " + std::to_string(i + 1) + " first)");

    // A compute op waits for every plain activation it reads that is still arriving.
    double ready = compute_end;
    const auto wait_for = [&](int k) { if (r.plain[k]) ready = std::max(ready, ready_ms[k]); };
    const ComputeCost cost = compute_cost(chain, op);
    wait_for(cost.reads);
    if (op.kind == OpKind::Bwd) {
      ready = std::max(ready, saved_ready_ms[i + 1]);  // a prefetch_saved still in flight
      ready = std::max({ready, inputs.ready(i), carries.ready(i)});  // or a prefetch_input / _carried
    }
    // What the new object shares with what is already there (Note [Carried bytes]).
    const int64_t shared_bytes = op.kind == OpKind::Bwd    ? gradient_overlap(chain, r, i)
                                 : op.kind == OpKind::Loss ? gradient_overlap(chain, r, L)
                                                           : activation_overlap(chain, r, i + 1);
    const int64_t add_bytes = cost.add_bytes - shared_bytes, tmp_bytes = cost.tmp_bytes;
    const double dur_ms = cost.dur_ms;
    int64_t remove_bytes = 0;
    const double start = ready;
    const double end = start + dur_ms;
    op_start_ms[p] = start;
    out.stall_ms += start - compute_end;
    compute_end = end;
    if (timed_stop) {
      compute_left_ms -= dur_ms;
      if (end + compute_left_ms > late_ms) {
        out.stopped_late = true;
        return fail(out, p, "ends after the bound on its time");
      }
    }
    if (record_event({start, 2 * static_cast<int64_t>(p), add_bytes + tmp_bytes, p})) return stopped(p);

    switch (op.kind) {
      case OpKind::FwdKeep:
        r.saved[i + 1] = 1;
        saved_ready_ms[i + 1] = end;
        break;
      case OpKind::FwdCkpt:
      case OpKind::FwdDrop:
        r.plain[i + 1] = 1;
        place[i + 1] = Place::Device;
        ready_ms[i + 1] = end;
        if (op.kind == OpKind::FwdDrop) {
          r.plain[i] = 0;
          place[i] = Place::None;
          remove_bytes += chain.x(i) - activation_overlap(chain, r, i);
        }
        break;
      case OpKind::Loss:
        r.grad[L] = 1;
        if (r.plain[L]) {
          r.plain[L] = 0;
          place[L] = Place::None;
          remove_bytes += chain.x(L) - activation_overlap(chain, r, L);
        }
        break;
      case OpKind::Bwd:
        r.grad[i] = 1;
        r.grad[i + 1] = 0;
        remove_bytes += chain.x(i + 1) - gradient_overlap(chain, r, i + 1);
        r.saved[i + 1] = 0;
        remove_bytes += chain.xbar(i + 1) - activation_overlap(chain, r, i + 1);
        if (r.plain[i]) {
          r.plain[i] = 0;
          place[i] = Place::None;
          remove_bytes += chain.x(i) - activation_overlap(chain, r, i);
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
      case OpKind::WaitOffloads:  // handled above, before the compute stream
        break;
    }
    record_event({end, 2 * static_cast<int64_t>(p) + 1, -(tmp_bytes + remove_bytes), -1});
  }

  if (over) return stopped(n - 1);
  for (int k = 0; k <= L; ++k) {
    if (place[k] == Place::OnHost)
      return fail(out, n, "a_" + std::to_string(k) + " was offloaded and never prefetched");
    if (hollow[k]) return fail(out, n, "the saved state of ā_" + std::to_string(k) + " was offloaded and never prefetched");
    if (inputs.is_out(k)) return fail(out, n, "a_" + std::to_string(k) + "'s own bytes were offloaded and never prefetched");
    if (carries.is_out(k)) return fail(out, n, "a_" + std::to_string(k) + "'s ending carry was offloaded and never prefetched");
  }
  if (std::string e = check_end(chain, r); !e.empty()) return fail(out, n, e);

  // Note [Events in time order]
  // Events apply in (time, order) order, ties kept in the order they were made. The
  // compute ops' starts and ends and the prefetches' allocations are made in program
  // order, which is already that order: each starts no earlier than the op before it
  // ended, a prefetch allocates when the compute op before it ends, and `order` grows
  // with the op. Only the frees at the ends of offload copies, made when the copy is
  // issued, are not, and no event of the other kind has their `order`. So the frees
  // alone are sorted and the two runs are walked together: the order of one stable
  // sort of all the events, which cost the polish about a tenth of its time.
  const auto before = [](const MemEvent& a, const MemEvent& b) {
    return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.order < b.order;
  };
  std::stable_sort(frees.begin(), frees.end(), before);
  if (!std::is_sorted(events.begin(), events.end(), before)) std::stable_sort(events.begin(), events.end(), before);
  int64_t total = 0;
  const auto apply = [&](const MemEvent& e) {
    total += e.delta_bytes;
    if (total > out.peak_bytes) { out.peak_bytes = total; out.peak_op = e.op; }
  };
  size_t next_free = 0;
  for (const MemEvent& e : events) {
    while (next_free < frees.size() && before(frees[next_free], e)) apply(frees[next_free++]);
    apply(e);
  }
  while (next_free < frees.size()) apply(frees[next_free++]);
  out.time_ms = std::max(compute_end, last_copy_end);
  out.offload_done_before.assign(n, -1);
  for (int p = 0; p < n; ++p) {
    if (offload_end_ms[p] < 0) continue;
    for (int q = p + 1; q < n; ++q) {
      // A copy ending exactly as an op starts frees its bytes first (event order).
      // Offload ops allocate nothing (op_start_ms -1): they never need to wait.
      if (op_start_ms[q] >= 0 && op_start_ms[q] >= offload_end_ms[p]) { out.offload_done_before[p] = q; break; }
    }
  }
  out.valid = true;
  return out;
}

}  // namespace memopt::solver

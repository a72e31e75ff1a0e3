// simulate.h: replays a schedule on a chain and says whether it is valid, its peak
// device bytes and its time -- docs/formats.md, "Operations and memory without offload: the
// sequential simulator" (sequential, no offload) and docs/formats.md, "Offload: the timeline simulator"
// (compute stream plus full-duplex d2h/h2d links). Every schedule is checked here
// before anyone trusts it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/op_context.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

struct SimResult {
  bool valid = false;
  std::string error;        // empty when valid: what is wrong, naming the op
  int error_op = -1;        // index into ops of the first bad op, -1 if none
  int64_t peak_bytes = 0;   // highest device total at any instant
  double time_ms = 0;       // when the last compute op or copy ends
  int peak_op = -1;         // the op at whose start the peak was reached
  // Offload statistics (docs/formats.md, "Offload: the timeline simulator" only; zero without offload ops).
  double copy_ms = 0;       // total time the links were busy
  double stall_ms = 0;      // time the compute stream waited for a prefetch
  // For each offload / offload_saved op p: the first op that allocates at or after the
  // end of its copy -- a compute op at its start, a prefetch / prefetch_saved at its
  // issue -- so that every allocation before it counts p's device bytes and every one
  // from it on does not; or -1. A runtime holds the device bytes of p until that op
  // and waits there for p's copy, so that its memory follows this simulation's, byte
  // for byte, however fast or slow its copies run (runtime/executor.h).
  std::vector<int> offload_done_before;
  // Stopped by simulate_timeline's stop_above_bytes (Note [Stopping over the budget]):
  // the plan holds more than that at some instant; nothing else is known of it.
  bool stopped_over = false;
  // Stopped by stop_after_ms: the plan ends later than that; nothing else is known.
  bool stopped_late = false;
};

// docs/formats.md, "Operations and memory without offload: the sequential simulator". Rejects
// offload/prefetch ops (use simulate_timeline for those).
SimResult simulate_sequential(const Chain& chain, const std::vector<Op>& ops);

// Note [Offloading saved state] (memopt's extension of docs/formats.md, "Offload: the timeline simulator")
// The original contract moves only plain activations a_k. A transformer block saves ~25x its input,
// so at a tight budget moving a_k frees almost nothing; what must move is the
// saved state. `offload_saved k` (ā_k resident and whole, k in 1..L) copies the
// x̄_k - x_k bytes of ā_k beyond a_k on the d2h link exactly as `offload` does (starts
// when ā_k exists and the link is free, frees the device bytes when it ends) and
// leaves ā_k "hollow": a_k stays on the device and serves as the input of stage k,
// but `bwd k-1` needs ā_k whole. `prefetch_saved k` allocates those bytes at issue
// and copies them back on the h2d link once the offload has ended; `bwd k-1` waits
// for it as a compute op waits for a prefetch. The runtime moves exactly the
// tensors stage k-1's autograd graph saved, other than its input, its output and
// parameters (runtime/saved_state.h).

// Note [Waiting for the offloads]
// A compute op waits for the data it reads, never for memory: while an offload is
// still copying, its device bytes count, and the next op's allocation lands on top
// of them. `wait_offloads` (memopt's extension of docs/formats.md, "Offload: the timeline
// simulator") makes the compute
// stream wait until every offload and offload_saved issued before it has ended --
// on a GPU, the compute stream waiting on the d2h stream's last event -- so that
// the ops after it start once those bytes are gone. Copies issued after it start
// no earlier than its end. It takes the time it waits (counted as stall) and holds
// nothing; with no copy in flight it costs nothing. Without it, a plan could only
// make an op wait for memory with a round trip: offloading some activation and
// prefetching it back in the same gap, so that the op that reads it waits for both
// copies -- paying for a copy to buy a wait.

// Note [A kept stage keeps its input]
// `offload k` is refused while ā_{k+1} is resident (between `fwd_keep k` and `bwd k`).
// A stage may save its own input for its backward (GPT-2's embedding saves the token
// ids, every LayerNorm its input), and the profile does not count that input again in
// x̄_{k+1} (Note [Stage byte accounting] in profiler/profiler.h): the saved graph holds
// a_k's storage, so moving a_k to the host would free nothing on a real device while
// the simulator freed x_k. The saved state itself moves with `offload_saved k+1`, and
// a_k itself with `offload_input k`, which moves the storage's bytes out from under
// every holder (Note [A kept stage's input may leave]).

// Note [A kept stage's input may leave]
// At operator granularity most of what a kept run of stages holds is its stages'
// inputs: each op's output is the next op's input, and `offload_saved` moves only what
// a stage saves beyond its input and output. So a kept stage's input must be able to
// leave too, or a plan at operator granularity could not do what a block's
// `offload_saved` does. `offload_input k` (stage k has run `fwd_keep k`, so ā_{k+1}
// is resident; a_k is on the device, plain or inside ā_k) copies the own bytes of a_k
// -- x_k less the longer of the prefixes it carries with a_{k-1} and a_{k+1}
// (Chain::own_bytes; those prefixes stay, for the neighbours hold them too) -- on the
// d2h link as `offload` does, and frees them when the copy ends. Until
// `prefetch_input k` has brought them back (allocated at issue, copied after the
// offload ended) nothing may read a_k: `bwd k` (its input) and `bwd k-1` (ā_k whole)
// are refused, and wait for the copy once it is issued. Nothing else can touch a_k
// meanwhile: stage k cannot run again while a_{k+1} is resident, nor stage k-1 while
// a_k is. The runtime moves those storages' bytes and leaves every tensor that views
// them -- the leaf autograd accumulates into, the saved tensors of both graphs, the
// previous stage's output -- in place, empty until the bytes come back
// (runtime/executor.cpp).

// Note [Carried bytes may leave]
// `offload_input` moves only bytes no neighbour holds, so a tensor carried through
// several operator stages -- a block's residual stream beside its attention
// sublayer, q, k and v beside the scores and softmax -- could not leave, though a
// block's `offload_saved` moves it. Such bytes have one last holder: a_k holds bytes
// of a_{k-1} that a_{k+1} does not (positions c_{k+1} .. c_k of both, when c_k >
// c_{k+1}: Chain::ending_carried_bytes), and a_s .. a_k hold them
// (s = Chain::first_holder_of_ending_carry(k)), no other activation. `offload_carried
// k` copies them to the host once every stage s .. k has run `fwd_keep` (ā_{s+1} ..
// ā_{k+1} resident) with a_s .. a_k on the device, and frees them when the copy
// ends; `prefetch_carried k` brings them back. Nothing reads them meanwhile but what
// the simulator refuses: stage m (s <= m <= k) cannot run again while ā_{m+1} is
// resident, `bwd m` comes after `bwd k`, and `bwd k` waits until they are back, as for
// `prefetch_input k`. The bytes are disjoint from a_k's own (positions c_k .. x_k
// less what a_{k+1} carries) and from those of every other ending carry, so the
// three moves of a kept run -- own bytes, ending carries, saved states -- together
// move everything a block's `offload_input` and `offload_saved` move (solver/chain/coarsen.h).

// What a compute op costs at its start (docs/formats.md, "The ops" and "Compute ops"): the
// object it adds, its transient, its time, and the plain activation it reads and so
// may wait for (a_i, or a_L for the loss). A bwd right after its own fwd_keep has its
// own price (Note [A stage run back to back] in chain.h): `back_to_back` says so, as a
// BackToBack that has followed the ops before it tells.
struct ComputeCost {
  int64_t add_bytes = 0;
  int64_t tmp_bytes = 0;
  double dur_ms = 0;
  int reads = -1;
};
ComputeCost compute_cost(const Chain& chain, const Op& op, bool back_to_back);
// The plain activation a compute op reads (compute_cost's `reads`); -1 for a copy or a wait.
int compute_reads(const Chain& chain, const Op& op);

// The compute ops' durations summed in program order, as simulate_timeline adds them
// when nothing stalls. A stall only delays an op's start, and a floating-point sum
// never falls when a term rises, so no simulated time of a plan with these compute
// ops, copies and waits however placed, is below it: a search may skip a plan whose
// bound is already no faster than its best.
double compute_only_ms(const Chain& chain, const std::vector<Op>& ops);

// docs/formats.md, "Offload: the timeline simulator". Needs chain.link when the ops offload or prefetch.
// On schedules without offload it gives exactly simulate_sequential's numbers.
// Note [Stopping over the budget]: with `stop_above_bytes`, a plan that surely holds
// more at some instant stops there, invalid, with SimResult::stopped_over set; with
// `stop_after_ms`, a plan that surely ends later stops, invalid, with stopped_late.
// That test needs the plan's compute_only_ms; a caller that simulates many plans
// with the same compute ops (Note [One compute total per search] in polish.h) passes
// it as `known_compute_ms` rather than have every simulation sum it again.
SimResult simulate_timeline(const Chain& chain, const std::vector<Op>& ops,
                            int64_t stop_above_bytes = std::numeric_limits<int64_t>::max(),
                            double stop_after_ms = std::numeric_limits<double>::infinity(),
                            std::optional<double> known_compute_ms = std::nullopt);

// Note [Resuming from a shared prefix] (simulate.cpp): simulates plans that mostly
// share a prefix with `base`, each from the state after the longest such prefix.
class TimelinePrefix {
 public:
  // `compute_ms`: compute_only_ms of base; every plan simulated must have base's
  // compute ops, in any order (Note [One compute total per search] in polish.h). With
  // `rejoin`, a plan's run also stops where it rejoins the base's (Note [Runs that
  // rejoin the base] in simulate.cpp): for a search that simulates many plans per base.
  TimelinePrefix(const Chain& chain, std::vector<Op> base, double compute_ms, bool rejoin = false);
  ~TimelinePrefix();
  TimelinePrefix(const TimelinePrefix&) = delete;
  TimelinePrefix& operator=(const TimelinePrefix&) = delete;
  // A new base (valid, with the same compute ops); the state is kept where it agrees.
  void rebase(std::vector<Op> base);
  // simulate_timeline(chain, ops, stop_above_bytes, stop_after_ms, compute_ms), bit for
  // bit, but offload_done_before, which it leaves empty (Note [Op times only for whole
  // simulations] in simulate.cpp).
  SimResult simulate(const std::vector<Op>& ops, int64_t stop_above_bytes = std::numeric_limits<int64_t>::max(),
                     double stop_after_ms = std::numeric_limits<double>::infinity());

  // How many runs so far ended by rejoining the base.
  int64_t rejoins() const;
  // How many times the state went back along the base to a state it had kept rather
  // than to the first op (Note [Going back along the base] in simulate.cpp).
  int64_t back_to_kept() const;

 private:
  static constexpr int kShortestPrefixOps = 32;  // shorter: simulated from the first op
  struct State;
  const Chain& chain_;
  std::vector<Op> base_;
  double compute_ms_;
  std::unique_ptr<State> state_;
};

// Valid and peak <= budget_bytes.
inline bool fits(const SimResult& r, int64_t budget_bytes) {
  return r.valid && r.peak_bytes <= budget_bytes;
}

// Note [What the simulator refuses]
// simulate_timeline refuses a plan (SimResult::error, at error_op) for what its ops
// hold and in which order: an op that reads data not resident, copies data that is
// not where the copy needs it, or leaves data behind at the end. None of those checks
// reads the clock, so a wait_offloads put in anywhere, which only moves the clock,
// leaves the plan refused at the same op (one place on where the wait comes before
// it), or accepted. And it runs the ops in order and stops at the first refused one,
// so every plan that agrees with a refused one up to and including that op is refused
// there too.
// A stopped simulation (Note [Stopping over the budget] in simulate.cpp) is not a
// refusal: it says nothing about the ops after it.
// SimulateTimeline.AWaitNeverChangesWhatIsRefused checks both on round trips.
inline bool refused(const SimResult& r) { return !r.valid && !r.stopped_over && !r.stopped_late; }

}  // namespace memopt::solver

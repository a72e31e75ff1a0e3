// polish.h: improves a valid plan by local moves of its copies and waits, each move
// judged by the timeline simulator (docs/formats.md, "Offload: the timeline simulator") in exact bytes.
//
// Note [Polishing a plan's copies]
// The offload DP decides which data moves and, within its class (Note [The offload
// schedule class] in offload.h), when: an offload right after its data exists, a
// prefetch one item ahead or just in time, a wait only at the start of an item. The
// simulator accepts far more: a prefetch issued any number of ops before its reader
// (inside a recomputed segment's backward too), an offload issued later so that it
// does not queue behind another, a wait in the middle of an item, a saved state moved
// out and back around a recomputation. On small chains the fastest plan of the whole
// vocabulary (tests/solver/exhaustive_oracle.h) is often one of those moves away
// from the DP's, so `optimal` tries them on its best candidate:
//  - shift: each copy or wait moved by up to `window_ops` positions either way;
//  - drop: each wait, and each offload together with its prefetch;
//  - wait: a wait_offloads put before a compute op while an offload is in flight
//    (Note [A wait that waits for nothing]);
//  - round trip, while the plan is over the budget (Note [Round trips only repair]),
//    with its offload before the peak (Note [Round trips after the peak]):
//    data that does not move yet (ā_{k+1} after the fwd_keep k that its bwd k uses;
//    a_k, if it shares no carried bytes, after any op that reads it) offloaded right
//    after that op and prefetched at each of the `window_ops` positions before the op
//    that reads it next;
//  - recompute: a forward after the loss moved one or two positions earlier, past a
//    bwd or a copy, so that it runs while a backward would wait for its prefetch
//    (the one move of a compute op: on the oracle's chains it closes 2 of the 4
//    budgets the others leave, and it cost nothing measurable on the solver bench).
// A move is taken when the simulator accepts the new plan and it is better by the
// key (bytes over the budget, time, copies, peak): for a plan that fits, one that
// still fits and is faster, or as fast with fewer copies, or as fast with as many
// copies and a lower peak. The moves are tried in order, the first that helps is
// taken and the scan goes on, and the passes repeat until one helps nowhere (at most
// `max_passes`). Every step strictly lowers the key, so the result is never worse
// than the plan given, keeps no copy a drop could remove for free, and it is valid
// by construction: it is the simulator's own verdict. A data moves at most once each
// way, as in the oracle. It is a local search, not a proof: the DP's structure (what
// is kept, recomputed, checkpointed) is not changed, only when a recomputation runs,
// so it does not reach every optimum.
//
// Note [Repairing a plan over the budget]
// The DP's plan at a larger budget keeps more and recomputes less; it is often a few
// copies away from a plan that fits the smaller budget and is faster than anything
// the DP finds there, because the DP's class cannot place those copies. So the
// polish also starts from a plan whose peak is over the budget: the excess comes
// first in the key, so every move that lowers it is taken, whatever it costs in
// time, and once the plan fits it is polished as any other. While the plan is over,
// a round trip is also tried with a wait_offloads before one of the `window_ops`
// compute ops after the offload: an offload frees its bytes only when its copy ends,
// and a plan that needs the room must wait for it. A plan still over the budget after
// `max_repair_passes` passes is given back as it is: a plan that can be repaired
// nearly always fits after the first pass, and the passes of one that cannot are the
// polish's dearest. The caller simulates the plan
// and drops it if it is over (Note [Starts over the budget] in optimal.cpp).
//
// Note [Round trips only repair]
// In the timeline simulator a compute op waits for data, never for memory (docs/
// formats.md, "Offload: the timeline simulator"), and every time in it is a latest-of
// and a sum: a compute op starts at the latest of the previous one's end and its data's
// arrival, a copy at the latest of its issue, its data and the previous copy on its
// link. A round trip only adds two copies: each later copy on those links starts no
// earlier, so each prefetch ends no earlier, each compute op starts no earlier, and
// the plan takes no less time (floating-point sums and maxima are monotone too). It
// adds two copies to the key's count as well, so for a plan that fits, whose excess
// cannot fall below 0, no round trip is ever better by the key, and the polish tries
// them only while the plan is over the budget. The test
// SimulateTimeline.AddingARoundTripOrAWaitNeverMakesAPlanFaster checks the premise.
//
// Note [Round trips after the peak]
// A round trip is tried only while the plan is over the budget (Note [Round trips
// only repair]), where it is better by the key only if it lowers the peak: it never
// makes the plan faster. Let p be the op at whose start the plan first reaches its
// peak (SimResult::peak_op). A round trip whose offload goes in after p leaves every
// op up to p as it was, and every event they make: the ops and copies before it run
// as before, and everything the round trip adds or delays -- the offload's copy and
// its free, the ops after it, the prefetch and any wait -- happens no earlier than
// the offload's issue, which is after p has started, and comes after p's start in
// event order. So the plan with it still holds the peak's bytes at p's start: its
// peak is no lower, and the polish does not try it (a copy of no bytes frees nothing,
// so its end, which may fall at p's start, changes no total).
// SimulateTimeline.ARoundTripAfterThePeakNeverLowersIt checks it.
//
// Note [Refused round trips]
// Every candidate of one round trip has the plan's ops up to the offload, then the
// offload; the prefetch positions differ only after it, and the waits tried with a
// position only add a wait_offloads to it. So by Note [What the simulator refuses]
// (simulate.h), where the simulator refuses the offload itself (the data is held as a
// saved state, is not on the device, or is a kept stage's input), it refuses every
// candidate of the trip at that op, and where it refuses a prefetch position, it
// refuses every wait tried with it. Such a candidate is never taken, so the polish
// stops the trip at the first refusal of its offload and skips the waits of a refused
// position: the same moves, and on block-dominated chains over a slow link most of
// the round trips the repair tried were refused at their offload, each after a
// simulation per prefetch position and per wait. The kicks that add a round trip
// (kicks.h) likewise try no more prefetch positions of an offload place refused.
//
// Note [A wait that waits for nothing]
// A wait_offloads put right before a compute op c ends when the last copy to the host
// issued before it ends, or at once. Where every such copy has ended by the time c
// starts in the plan without it, c starts when it did (the latest of the wait's end and
// what c waited for already), no copy is issued at another time (those before the wait
// are issued before it, those after c when c ends), and no byte is freed or taken at
// another time: the plan with the wait simulates to the same time and bytes, so it is
// no better by the key, and the polish does not try it. The simulator says when each
// copy to the host ends relative to the ops (SimResult::offload_done_before), and ops
// start in program order. SimulateTimeline.AWaitAfterEveryCopyHasEndedChangesNothing
// checks this.
//
// Note [The best repair first]
// Every round trip that lowers the excess is a repair, and the first one found
// need not be the one to take: on a small chain, offloading a kept stage's saved
// state can make the plan fit only with a wait, and leave a local optimum, while
// offloading the input a_0 instead makes it fit with no wait at all
// (Polish.RepairsWithTheFastestRoundTripThatFits). So while the plan is over the
// budget, a round trip that makes it fit is not taken when found: the round-trip
// scan goes on to its end, and the fastest round trip that made the plan fit is
// taken then. A round trip that lowers the excess without making the plan fit is
// still taken at once, unless it ends after the repair in hand (Note [Repairs that
// end after the best one]). Taking the best round trip at every step instead costs
// about three times as much on the solver bench's slow-link rows
// (BM_SolveOptimalWithSlowLink) and closes no more of the oracle's budgets. It is
// still a local search.
//
// Note [Repairs that end after the best one]
// Once the round-trip scan holds a repair F that fits (Note [The best repair first]),
// a candidate C that ends after both F and the plan is not taken, so its simulation
// stops where it surely will (Note [Stopping over the budget] in simulate.cpp)
// instead of running to the plan's end, and a prefetch position whose round trip
// ends so late is not tried with waits either: a wait only delays it. If C fits, F
// is faster. If it does not fit, it is better than the plan only where it lowers
// the excess (on a tie it would have to end sooner), and taking it would change the
// plan but not the scan's outcome: every
// candidate the scan makes from it after that adds a round trip to it, perhaps with
// a wait, and so ends no sooner than C (Note [Round trips only repair];
// SimulateTimeline.AddingARoundTripOrAWaitNeverMakesAPlanFaster), after F, so that
// none of them that fits can displace F, and the scan ends by taking its fastest
// repair that fits. Not taking C, the scan goes on trying the plan's own candidates,
// the very ones it would have tried had C never been found, so the repair it takes
// is never slower than the one it took when it did take such a C, and it can be
// faster. Most of a repair's candidates are round trips that fit, each slower than
// the best one so far, and their waits; each ran to the plan's end before.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"
#include "solver/chain/simulate.h"

namespace memopt::solver {

struct PolishOptions {
  int window_ops = 8;   // how far a copy may move in one step, and the prefetch positions tried
  int max_passes = 16;  // scans over the plan at most
  int max_repair_passes = 3;  // a plan still over the budget after these is given back as it is
  // When not empty, indexed by stage or activation index 0..L+1: only the copies and
  // compute ops of the marked indices move, and only the marked data make round trips
  // (waits move anywhere). Note [Kicks out of a local optimum] in kicks.h.
  std::vector<char> focus;
};

// What the polish lowers, compared in this order (Note [Repairing a plan over the
// budget]): the bytes over the budget, the time, the number of copies, the peak.
struct PlanKey {
  int64_t excess_bytes = 0;
  double time_ms = 0;
  int64_t num_copies = 0;
  int64_t peak_bytes = 0;
  friend auto operator<=>(const PlanKey&, const PlanKey&) = default;
};
PlanKey plan_key(const SimResult& sim, const std::vector<Op>& ops, int64_t budget_bytes);

// simulate_timeline for a candidate that counts only if its key is below `to_beat`:
// where `to_beat` fits the budget, such a candidate fits and is no slower, so the
// simulation may stop at the budget and at to_beat's time; where it does not, such a
// candidate holds no more than to_beat's peak, so it may stop there (Note [Stopping
// over the budget] in simulate.cpp). A caller that wants no candidate ending after
// `not_after_ms` stops there too. A stopped result is invalid.
SimResult simulate_to_beat(const Chain& chain, const std::vector<Op>& ops, const PlanKey& to_beat,
                           int64_t budget_bytes,
                           double not_after_ms = std::numeric_limits<double>::infinity());
// The same, from the state after the prefix `ops` shares with `prefix`'s base (Note
// [Resuming from a shared prefix] in simulate.cpp).
SimResult simulate_to_beat(TimelinePrefix& prefix, const std::vector<Op>& ops, const PlanKey& to_beat,
                           int64_t budget_bytes,
                           double not_after_ms = std::numeric_limits<double>::infinity());

// Note [One compute total per search]
// A simulation that may stop late (Note [Stopping over the budget] in simulate.cpp)
// starts from the plan's compute_only_ms, a pass over every op. The polish's moves
// and the kicks' round trips only move, add or drop copies and waits, or move a
// recomputation: the compute ops stay the same multiset, so their total is the same
// up to the order of the additions, a few units in the last place, far inside the
// billionth that the stopping test allows for rounding. So such a search sums it
// once for its plan and hands it to every simulation of a candidate.

// `ops` must be valid (simulate_timeline). If it fits budget_bytes, the plan returned
// fits too and is at least as fast; if not, the plan returned is over by no more,
// and may fit (Note [Repairing a plan over the budget]). Needs chain.link for any
// move.
std::vector<Op> polish_copies(const Chain& chain, int64_t budget_bytes, std::vector<Op> ops,
                              const PolishOptions& options = {});

}  // namespace memopt::solver

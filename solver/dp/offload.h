// offload.h: keep / recompute / offload chosen jointly under a budget and the link
// bandwidths -- checkpointed stage inputs a_k (docs/formats.md, "Offload: the timeline simulator")
// and, memopt's
// extension, the saved state of kept stages (Note [Offloading saved state] in
// simulate.h).
//
// Note [The offload schedule class]
// The forward pass is a sequence of items, each ending where the next begins, then
// a tail; the backward runs them in reverse:
//  - K e:     `fwd_keep e`; later `bwd e`.
//  - KO e:    `fwd_keep e, offload_saved e+1`; later `prefetch_saved e+1`, `bwd e`.
//  - KI e, KOI e: K e and KO e that also move a_e's own bytes, `offload_input e`
//             right after `fwd_keep e`; later `prefetch_input e` too (Note [A kept
//             item that moves its input]).
//  - C [e,n): `fwd_ckpt e`, optionally `offload e`, `fwd_drop e+1 .. n-1`; later a
//             persistent schedule (rotor.h) of stages e..n-1.
//  - KR [e,f): right after an item that offloaded, `fwd_keep e .. f-1` (f >= e+2);
//             later `bwd f-1 .. e`, that item's prefetch issued before the highest
//             bwd j such that bwd j .. e all fit holding its bytes (it hides behind
//             them), or after bwd e.
//  - CR [e,n): right after an item that offloaded, the forward of C [e,n); later
//             `fwd_keep e .. n-1`, that item's prefetch, `bwd n-1 .. e` (Note [A
//             recomputed run]).
//  - tail e:  a persistent schedule of e..L (with the loss); e = 0 is recompute-only.
// A C or CR item may be taken together with the K n after it (Note [A copy through
// a recomputed segment]). A KR run may also follow an item that offloaded without
// prefetching its data ahead, to let that item's copy run on through its forward
// (Note [A copy through a kept run]).
// An item's offloaded data is prefetched either when the next item's backward
// starts ("lead": the copy hides behind that backward, its bytes held during it; a
// KR run's bwd j .. e are one such backward, a CR run's bwd ops another) or when it
// ends ("just in time": no bytes held, the whole copy is exposed).
// Class rules, which keep the d2h link from ever queueing: an offload copy ends by
// the end of the next item's first compute op -- or, where the next item is C or CR,
// of its forward or of the fwd_keep of the K taken with it, and where it is a KR
// run, of the run's forward -- and before the tail starts unless the tail is the
// lone loss; or the next item, or a KR run right after it, waits for it (Note
// [Waiting for the previous offload], Note [A copy through a kept run]); `offload e` needs a plain
// a_e that shares no
// carried bytes with a neighbour (Note [Carried bytes] in chain.h).
// The DP runs over (item start e, device slots D held by earlier items including
// a_e, what the previous item left: nothing / a kept ā_e / a hollow ā_e / an
// offloaded a_e'). Every peak and time is what the docs/formats.md, "Offload: the timeline
// simulator" simulator gives for
// these ops (a copy in flight is counted exactly until the op it ends before), so
// the DP is exact over this class in slots and quantum units; the tests compare it
// with an exhaustive search over the class. The class does not hold every optimum:
// against the fastest plan of the whole vocabulary on small chains
// (tests/solver/exhaustive_oracle.h, chains of up to 4 stages) it lacks
// `offload_saved` issued during the backward, offloads issued ops after their data
// exists, prefetches more than one item ahead other than across a KR or CR run (in
// particular inside a persistent schedule that recomputes), offloads whose copies
// queue on the link, copies running through anything but a C forward into its K
// or a KR run's forward,
// waits other than at the start of an item, and forward orders that are not
// persistent. A kept stage's input leaves only right after that stage's own
// `fwd_keep`; the pipelined family moves inputs inside longer queues of copies.
// `optimal` also tries the pipelined family of offload_pipeline.h, whose plans of one
// shape have far prefetches and queued copies, and polishes its best candidate with
// moves outside the class (Note [Polishing a plan's copies] in polish.h). The tail alone is the
// recompute DP, so the value is
// never worse than recompute-only.
//
// Note [Waiting for the previous offload]
// Where the previous item's copy is still running when an item starts, the item
// may start with `wait_offloads` (Note [Waiting for the offloads] in simulate.h):
// its first op then starts π ms later (π: what is left of the copy, the same figure
// the window rule checks) and its slots are no longer pending, so every check of
// the item sees the copy gone; the copy no longer has to end within the item's
// first op. A tail may wait too, then runs with the whole of m whatever its length.
// The wait costs ceil(π / quantum) units, exactly the simulator's stall in the
// tests' exact units. Nothing else changes: the lead prefetch of the data is issued
// at the item's backward, long after the copy ended, or, for a waiting tail, right
// after the wait. It is what makes a budget feasible when the only way to fit an op
// is to let an offload free its bytes first, which is common at tight budgets: on
// the oracle's small chains the DP has a plan at every budget where the oracle has
// one.
//
// Note [A recomputed run]
// A C item's backward is a persistent schedule from the recompute table, which sees
// m = S - D slots less the lead prefetch's bytes: a lead prefetch is held through
// the whole backward, its re-forward ops included, and where one of those is what
// binds the budget the table must recompute more, or the prefetch must go just in
// time. The CR item is the one such schedule that keeps every stage of the segment,
// written out so the prefetch can sit inside it: the re-forward `fwd_keep e .. n-1`
// runs without the prefetch's bytes (it holds the gradient of a_n, x_n), then the
// prefetch is issued and hides behind `bwd n-1 .. e`, each of which holds its bytes,
// as behind a KR run. With D_k = D + sum_{e<=j<k} xbar_{j+1}, the checks are
// D_k + xbar_{k+1} + ftmp_keep_k + x_n <= S for each re-forward and
// D_k + xbar_{k+1} + x_{k+1} + x_k + btmp_k + P <= S for each bwd (P: the prefetch's
// slots); the cost is the C forward, sum (uf_k + ub_k), and what of the prefetch's
// units sum ub_k does not hide. A prefetch issued inside a recomputing schedule,
// between two of its re-forwards, is left out: the table would need the prefetch's
// position as one more dimension.
//
// Note [A copy through a recomputed segment]
// The window rule asks a copy to end within the next item's first compute op. A C
// item's forward is a run of no-grad ops that each hold only a stage input, an
// output and a temporary, so the previous item's copy may run on through them: each
// `fwd_drop k` that starts before the copy ends holds its bytes too, and is checked
// with them (the simulator frees a copy's bytes at the first op that starts after
// it ends, docs/formats.md, "Offload: the timeline simulator"). The item's own `offload e` would
// queue behind it, so it is
// allowed only when the copy has ended by the end of `fwd_ckpt e`. Where the copy
// is still running when the item's forward ends, the state after the item would
// have to carry the pending copy, which it does not record; instead the item lands
// only together with a K n whose `fwd_keep n` outlasts the copy (holding its bytes,
// checked) and whose `bwd n` fits, and the pair ends at (n+1, D + x_n + xbar_{n+1},
// kept). The emitted backward runs `bwd n`, then the item's own backward.
//
// Note [A kept item that moves its input]
// At operator granularity most stages save their input (a matmul its operand, GELU
// its argument), and the profile does not count it again in x̄_{e+1}: KO e moves
// little, and the bytes that hold the budget are a_e's. KI e and KOI e move them too
// (`offload_input e`, Note [A kept stage's input may leave] in simulate.h): only a_e's
// own bytes, o_e = x_e - max(c_e, c_{e+1}), since a carried prefix is also a
// neighbour's. KOI e issues its two copies back to back, the input's first, both as
// the next item's first op starts; they end π₁ = d2h(o_e) and π = π₁ + d2h(x̄_{e+1} -
// x_{e+1}) ms in, and each op of the next item holds the bytes of those still running
// when it starts (Previous::pending_at), as the simulator frees each copy's bytes at
// the first op that starts after it ends. The window rules and waits treat the pair
// as one copy ending at π; both prefetches are issued together where the item's one
// prefetch would be, and `bwd e`, which needs both, waits for the later. The state
// after the item records which of the two it moved (Left in offload.cpp); D drops by
// a_e's own slots, sl(x_e) - sl(x_e - o_e), the way Note [Hollow slots] splits x̄.
// On GPT-2 operator stages over a link they make `optimal` faster at tight budgets
// (results/HISTORY.md, "the offload DP's items that move a kept stage's input").
// Blocks still win some of
// those budgets: a kept block's one copy runs on through the next block's forward,
// where a kept operator stage's copy must end within the next item, a single short
// operator, since the class never lets copies queue.

// Note [A copy through a kept run]
// The window rule asks a copy to end within the next item's first compute op. When
// that item is a KR run [e, f), the copy may run on through the run's forward: each
// `fwd_keep k` that starts before the copy ends holds its bytes and is checked with
// them, and the run may end at f only once the copy has ended, by the end of
// `fwd_keep f-1` (after it, the next item would see a copy the state does not
// record), or by waiting for it: `wait_offloads` right after `fwd_keep f-1` (f >=
// e+1, a lone K e too), costing what is left of the copy, and the next item starts
// without it. That is where a plan waits when the op that needs the copy's bytes
// gone comes a few kept stages later, the loss for one: waiting before the run
// would stall for the whole copy. Without a lead prefetch the run is K e .. K f-1 one by one with the copy
// carried through them, its prefetch issued when `bwd e` ends. It is the shape of a
// plan that offloads a saved state and keeps the few stages after it while the copy
// runs, where the window rule would have made those stages wait for the link or be
// recomputed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/dp/rotor.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

// The bytes solve_offload reserves for its states on `length` stages with `slots`
// slots: a cost and a way back for each (item start, device slots, what the previous
// item left), about 6 times the recompute table (Note [Largest problem] in limits.h).
// It writes, and so maps, only the rows of the (item start, left) pairs it reaches
// (Note [Rows for the pairs reached] in offload.cpp): this is the most it can use.
int64_t offload_dp_bytes(int length, int64_t slots);

// Note [The DP's memory kept between solves]
// Where block inputs may move, the DP reaches most (item start, left) pairs and its
// rows run to tens of MB at L = 96, and `optimal` solves up to sixteen of them in a
// row (up to four classes, four budgets each). Freed and allocated again, every solve
// maps fresh pages and has the kernel zero them before the DP fills them: about a
// tenth of `optimal`'s time on the solver bench's slow link. A caller that solves
// several times passes one OffloadDpMemory to all of them; the tables then keep their
// pages, and a way back is only ever read where the DP wrote it, so it is not cleared
// between solves. A solve that needs more states than the memory holds allocates it
// again, pages and all; reserve() sizes it for the largest solve first (`optimal`
// lends its searches' DPs memories so reserved: Note [The DPs' memories lent out] in
// optimal.cpp). OffloadDp.AMemoryUsedByOtherSolvesChangesNoPlan checks that a used
// memory gives every solve a fresh one's plan.
class OffloadDpMemory {
 public:
  OffloadDpMemory();
  ~OffloadDpMemory();
  // Reserves (without writing) the states of a solve on `length` stages with up to
  // `slots` slots, so that no solve up to that size allocates its tables again.
  void reserve(int length, int64_t slots);
  struct Tables;
  Tables& tables() { return *tables_; }

 private:
  std::unique_ptr<Tables> tables_;
};

// Note [An answer known in advance]
// The DP skips the states that cannot beat the answer found so far (Note [States that
// cannot beat the answer] in offload.cpp), and the sooner that answer is low, the more
// it skips, and the fewer rows of states it takes (Note [Rows for the pairs reached]),
// which is what bounds `optimal`'s memory where its starts over the budget run. A caller that knows that some plan of the class costs at most U quantum
// units at this budget and these slots may start the DP with U as if it had found it:
// every state on a path as fast as the final answer is still reached, first, by the
// same item at the same cost, so the plan is the same op for op. One such U is the
// class's own answer at a smaller budget whose slots are no coarser and no more
// (answer_bounds): every check of the DP is a sum of sizes, each rounded up to slots,
// held against the slots, and with no finer slots and at least as many of them every
// check that passed there passes here, so each plan of the class there is one here at
// the same cost (the time quantum is the chain's). Where the bound was wrong anyway and
// no plan is found within it, the DP runs again without it: a wrong bound costs time,
// never a plan.
struct OffloadAnswer {
  std::optional<int64_t> at_most_units;  // in: some plan of the class costs at most this
  std::optional<int64_t> units;          // out: the answer's cost; unset where no plan fits
  bool solved_again = false;             // out: the bound was below the answer, and the DP ran again
  int64_t rows_merged = 0;               // out: rows expanded as part of another's (Note [Rows whose copy has ended] in offload.cpp)
  int64_t waits_merged = 0;              // out: of those, rows whose starts that wait were (Note [Waited rows merged] in offload.cpp)
};
// Whether the class's answer at (budget_bytes, slots) bounds its answer at
// (to_budget_bytes, to_slots) from above (Note [An answer known in advance]).
bool answer_bounds(int64_t budget_bytes, int slots, int64_t to_budget_bytes, int to_slots);

// Needs chain.link; without one (or with zero bandwidth) it is solve_recompute.
// `memory`, if given, holds the DP's tables from one call to the next. `table`, if
// given, is the recompute table of this chain, budget and options, with any extra
// slots (Note [A table past its budget] in rotor.h): it is read instead of filled again.
// `answer`, if given, may bound the answer and receives it (quantum units; without a
// usable link it is left unset).
std::optional<std::vector<Op>> solve_offload(const Chain& chain, int64_t budget_bytes, const DpOptions& options = {},
                                             OffloadDpMemory* memory = nullptr, const RecomputeTable* table = nullptr,
                                             OffloadAnswer* answer = nullptr);

// Whether a plan of solve_offload has a KR run that ends waiting for the copy it
// runs through (Note [A copy through a kept run]): a wait_offloads right after a
// fwd_keep, which no other item of the class emits.
bool has_waiting_kept_run(const std::vector<Op>& ops);

// Whether a plan has an offload_input, which in solve_offload's plans only a kept
// item that moves its input emits (Note [A kept item that moves its input]).
bool has_kept_input_move(const std::vector<Op>& ops);

// Baseline: checkpoint every stage input, offload each (but the last stage's, and
// those sharing carried bytes with a neighbour), and prefetch each one segment ahead.
std::vector<Op> offload_all_ops(const Chain& chain);
std::optional<std::vector<Op>> offload_all(const Chain& chain, int64_t budget_bytes, const DpOptions& options = {});

}  // namespace memopt::solver

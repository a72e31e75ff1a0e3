// kicks.h: a search out of the polish's local optima -- each plan one perturbation
// away from the polished plan, polished in turn, kept when it ends better.
//
// Note [Kicks out of a local optimum]
// The polish (Note [Polishing a plan's copies] in polish.h) keeps one move at a time
// and stops where no single move helps. The plans that still beat `optimal` on small
// and medium chains (the exhaustive oracle's, and the copy-placement MILP's of
// docs/formats.md, "The placement check") are a few moves away, none of which helps alone:
//  - a recomputation run one op later, and a prefetch moved ahead of another (each
//    alone slower, both together faster: Kicks.MoveARecomputationAndAPrefetchTogether);
//  - one saved state's round trip swapped for another's (dropping the first makes
//    the plan overflow; adding the second alone only costs time);
//  - a saved state moved out and back that then lets another stay, at the same
//    time (Kicks.SwapOneRoundTripForAnother);
//  - the last stage checkpointed, the loss run on its output, the stage re-run
//    with `fwd_keep` just before its backward and a wait put inside that backward.
// So the kick search perturbs the polished plan by one such move -- a round trip or
// a wait dropped, a round trip added (the polish's round trip, Note [Polishing a
// plan's copies], taken whatever it costs), a recomputation moved by one or two ops either way, a kept stage
// checkpointed and re-run before its backward -- whatever the move does to the time
// or the peak, polishes the result (which repairs a plan over the budget, Note
// [Repairing a plan over the budget]), and keeps it if it ends better by the
// polish's own key (over the budget, time, copies, peak). Then it polishes the new
// plan whole and starts over from it, until no kick helps.
//
// A kicked plan's polish moves only the ops within `focus_radius` stage indices of
// the kick's (PolishOptions::focus): the rest of the plan was already a local optimum
// and a kick changes it locally, and a whole polish per kick makes `optimal` about
// half again as slow (BM_SolveOptimalWithSlowLink at L = 48). With a radius of 6 the
// search ends where the unrestricted one does on the random chains of the placement
// check (tools/copy_placement_milp.py); with 3, not always. It is the polish's local search one level up
// (iterated local search), so it too is not a proof; it only ever returns a plan at
// least as good as the one it was given, and every plan it returns is one the
// simulator accepted. Each kick costs a whole polish, so `max_kick_polishes` bounds
// the polishes of one call: the kicks are tried in plan order, so a chain whose
// kicks run out of that bound gets them at its end first.
//
// Note [Kicks that cannot be faster]
// A kicked plan is kept only if its polish ends better than the plan so far by the
// key, and where that plan fits the budget, better means no slower. The polish keeps
// the compute ops, as a multiset (Note [One compute total per search] in polish.h), and
// no plan with those compute ops takes less than their sum (compute_only_ms). A kick
// that checkpoints a kept stage and re-runs it adds a forward, and where that sum
// then passes the plan's time (by more than the billionth rounding may account for),
// no polish of it can win: it is not polished. It still counts against
// `max_kick_polishes`, so that the kicks tried are the ones tried without the
// shortcut. Kicks.APolishedPlanNeverTakesLessThanItsComputeOps checks the premise.
#pragma once

#include <cstdint>
#include <vector>

#include "solver/chain/chain.h"
#include "solver/search/polish.h"
#include "solver/chain/schedule.h"

namespace memopt::solver {

struct KickOptions {
  PolishOptions polish;
  int max_kick_polishes = 4000;  // polishes of kicked plans, over the whole search
  int focus_radius = 6;  // a kicked plan's polish moves ops within this many indices of the kick's
};

// `ops` must be valid and should already be polished. Returns a plan at least as
// good by the polish's key; needs chain.link for any move.
std::vector<Op> kick_search(const Chain& chain, int64_t budget_bytes, std::vector<Op> ops,
                            const KickOptions& options = {});

}  // namespace memopt::solver

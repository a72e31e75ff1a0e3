// search_options.h: every tuned number of `optimal`'s search (docs/solver.md), with
// its default and the reason for it. The Notes named here hold the whole argument;
// the tests and benchmark rows named show the effect.
#pragma once

#include <cstddef>
#include <vector>

#include "solver/search/kicks.h"
#include "solver/search/polish.h"

namespace memopt::solver {

struct SearchOptions {
  // Note [Slot rounding slack] in optimal.cpp: the recompute table runs on past the
  // budget by what rounding can have cost, a slot per object the recurrence may hold
  // (slack_slots_per_stage * L + slack_slots_fixed), and by at most
  // slots / slack_most_divisor, so that the plans it adds stay near the budget.
  // Shown by SolveRecomputeOnly.SlackRecoversWhatSlotRoundingLoses.
  int slack_slots_per_stage = 2;
  int slack_slots_fixed = 4;
  int slack_most_divisor = 4;

  // Note [Starts over the budget] in optimal.cpp: the offload DP's plans at the budget
  // plus these eighths of the way to the store-all peak, repaired down to the budget.
  // Larger eighths close few more of the oracle's budgets (OffloadDpOracle.
  // NeverBeatsTheFastestPlanTheSimulatorAccepts) at about twice the solve time
  // (BM_SolveOptimalWithSlowLink). Each larger budget gets proportionally more slots,
  // at most over_budget_slot_factor times as many, so its slots stay as fine.
  std::vector<int> over_budget_eighths = {1, 2, 3};
  int over_budget_slot_factor = 2;
  // A repaired start slower than the best plan so far by more than this fraction of
  // its time ends the series (Note [Starts over the budget]); infinity: never.
  double over_budget_stop_fraction = 0.10;

  // Note [Starts that keep a recomputed stage] in optimal.cpp: the starts that gain
  // the most time per byte over the budget; the first one alone closes as many of the
  // oracle's budgets as all of them (SolveOptimal.KeepsAStageTheDpRecomputesWhenCopiesMakeRoom).
  size_t kept_stage_starts = 2;

  // Note [Known plans from the blocks] in optimal.cpp: how many times the chain of
  // blocks is solved again at a smaller budget until its written-out plan fits.
  int block_budgets = 4;

  // Note [A probe asks only whether a plan fits] in optimal.cpp: the search for the
  // smallest budget that works (solve.h) sets it.
  bool any_fitting_plan = false;

  PolishOptions polish;  // Note [Polishing a plan's copies] in polish.h
  KickOptions kicks;     // Note [Kicks out of a local optimum] in kicks.h
};

}  // namespace memopt::solver

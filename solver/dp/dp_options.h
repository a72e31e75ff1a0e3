// dp_options.h: the options every DP of the solver takes -- the memory's
// discretisation, threads, rotor's variant of the recurrence, and the shapes the
// offload DP's class admits.
#pragma once

namespace memopt::solver {

// The shapes the offload DP's class admits (Note [The offload schedule class] in
// offload.h), each level all those of the one before it.
enum class OffloadShapes {
  // Every offload copy ends within the next item's first op or is waited for.
  Windowed,
  // + CR items and copies running on through a C item's forward (Notes [A recomputed
  // run] and [A copy through a recomputed segment] in offload.h).
  ThroughRecomputation,
  // + copies running on through a KR run's forward (Note [A copy through a kept run]).
  ThroughKeptRuns,
  // + KR runs that end waiting for the copy they run through (the same Note).
  WaitingKeptRuns,
  // + K and KO items that move their input too (Note [A kept item that moves its input]).
  MovingKeptInputs,
};

struct DpOptions {
  int slots = 500;            // memory discretisation: unit = budget / slots, sizes rounded up
  bool rotor_compat = false;  // keep branch checks x_{s+1} instead of x_{t+1}, as rotor does
  int num_threads = 0;        // 0: all cores
  OffloadShapes offload_shapes = OffloadShapes::MovingKeptInputs;  // the offload DP only
  // The offload DP skips states and items that cannot beat its answer (Note [States
  // that cannot beat the answer] in offload.cpp); false runs it without, as the tests'
  // reference for that the skipping changes no plan.
  bool skip_beaten_states = true;
  // true: the offload DP expands one row of states per (item start, left) pair and each
  // state's items in its loops' plain order, as the tests' reference for that Notes
  // [Rows whose copy has ended], [KR runs by row] and [C items by row] in offload.cpp
  // change no plan.
  bool plain_expansion = false;
};

}  // namespace memopt::solver

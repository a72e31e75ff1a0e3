// side_by_side.h: independent pieces of one search run on several threads at once.
//
// Note [Searches side by side]
// `optimal`'s searches from the offload DP's classes (Note [Classes to start from] in
// optimal.cpp) and its kicks of the finalists are each a pure function of the problem
// and their start: the polish and the DPs are deterministic and share nothing but
// recompute tables, each filled once (the one at the budget before they start, those
// of the starts by the first piece that needs each: Note [The starts' tables shared
// by the classes] in optimal.cpp) and then only read. So they may run
// at once, each on its own thread with its own caches, and their results be taken in
// the order the sequential search took them: the plan is the same op for op, whatever
// the threads and however they interleave. A piece whose result the sequential search
// would not have used (a later class once a plan takes the least time any plan can)
// is computed and dropped.
#pragma once

#include <functional>
#include <vector>

namespace memopt::solver {

// Runs every task, at most `threads` at a time (0: as many as the machine has), and
// returns once all have ended; rethrows the first exception a task threw. A thread
// takes the next task as it finishes one, in the order given.
void run_side_by_side(const std::vector<std::function<void()>>& tasks, int threads);

// The threads each of `tasks` pieces may use inside itself, when `threads` (0: as
// many as the machine has) are shared out among them.
int threads_per_piece(int threads, int pieces);

}  // namespace memopt::solver

// stage_timing.h: each stage's forward, no-grad forward and backward timed inside
// real training steps, for the profile's times (Note [Stage times from training
// steps]). MEASURED, on the CPU testbed's wall clock.
#pragma once

#include <string>
#include <vector>

#include "measure/wall_clock_tracer.h"
#include "model/staged_model.h"
#include "solver/chain/chain.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {

// Note [Stage times from training steps]
// Timed alone, a stage runs with its input just written and little else resident; in
// a training step it runs after every other stage has filled the caches with its own
// data, and its backward long after its forward. Predictions built on isolated times
// were off by tens of percent on the CPU testbed, more for some schedules than
// others. So the profile's times come from the steps themselves: store-all steps
// (every `fwd_keep` and `bwd` once) and steps that checkpoint every stage input (each
// stage's no-grad forward `fwd_ckpt` once) replayed by the executor, taking
// turns after `warmup` unmeasured rounds (runtime/measured_run.h's Note [Measurement
// protocol]), every op timed from its start to its end. A stage's time is the median
// over every timed instance of its op. What the simulator adds up is then what a
// step spends in those ops; the executor's bookkeeping between ops is not in it. The
// checkpointing steps run every stage but the last again after the loss, its fwd_keep
// right before its bwd, so they also time each stage run back to back (Note [A stage
// run back to back] in solver/chain/chain.h); the last stage, never run so there, gets
// its store-all sum.
struct StageTimes {
  std::vector<double> fwd_ms;         // fwd_keep, under autograd
  std::vector<double> fwd_nograd_ms;  // fwd_ckpt / fwd_drop
  std::vector<double> bwd_ms;
  std::vector<double> fwd_bwd_pair_ms;  // fwd_keep and bwd back to back, together
};

struct StageTimingOptions {
  int warmup_rounds = 2;
  int rounds = 5;
  int threads = 1;  // compute threads (Note [One compute thread] in profiler/profiler.h)
};

// Runs training steps (forward, backward, an AdamW step) along store-all and
// recompute-blocks for `chain` (the model's profile) in training mode, then restores
// the parameters and their gradients, the RNG state, the thread count and the mode,
// so the model is as it was.
StageTimes time_stages_in_steps(model::StagedModel& model, const model::Batch& batch, const solver::Chain& chain,
                                const StageTimingOptions& options = {});

// The two schedules whose steps time the stages, store-all's then the checkpointing
// one's, as time_stages_in_steps runs them.
std::vector<std::vector<solver::Op>> stage_timing_schedules(const solver::Chain& chain);

// The stage times, stage by stage (`names`: the model's stages'), from every op the
// tracers recorded in steps of those two schedules, store-all's and the checkpointing
// one's (Note [Stage times from training steps]). Throws std::logic_error when a stage's
// fwd_keep or bwd was never timed.
StageTimes stage_times_from(const std::vector<std::string>& names, const measure::WallClockTracer& store_all,
                            const measure::WallClockTracer& checkpointed);
std::vector<std::string> stage_names(const model::StagedModel& model);

// Writes the times into the chain's stages (fwd_ms, fwd_nograd_ms, bwd_ms,
// fwd_bwd_pair_ms).
void apply_stage_times(solver::Chain& chain, const StageTimes& times);

}  // namespace memopt::runtime

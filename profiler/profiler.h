// profiler.h: rotor's measurement protocol on a StagedModel, producing the solver's
// Chain (docs/formats.md, "The chain model") and the profile.json that `memopt profile` writes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/backend.h"
#include "measure/memory_meter.h"
#include "measure/stage_tracer.h"
#include "measure/timer.h"
#include "model/staged_model.h"
#include "solver/chain/chain.h"
#include "solver/io/profile_json.h"

namespace memopt::profiler {

// Note [Stage byte accounting]
// How each byte field is measured so that the peaks of docs/formats.md, "Operations and memory
// without offload: the sequential simulator" equal what a run
// really allocates. Per stage i, repeated (the fields are the max over runs; they
// are identical in practice), with parameters and their gradients already allocated
// and a_i resident; M = meter.current_bytes(), P = meter.peak_bytes() after a reset:
//   1. x = a_i detached (each of its tensors; Note [Multi-tensor activations] in
//      model/staged_model.h), requiring grad unless i = 0 (a_0 holds token ids).
//      Under autograd y = stage(x). carried_bytes = the bytes of y's storages that
//      are x's (c_{i+1}: the residual an operator stage passes through).
//      saved_bytes = M_after - M_before + c_{i+1}: every tensor the graph keeps plus
//      y, i.e. ā_{i+1} (whose carried part already sat in M_before). x's storage is
//      already in M_before, so a stage that saves its input (LayerNorm does) does not
//      count it again: the model keeps the input resident next to ā_{i+1} until
//      `bwd i` anyway. out_bytes = bytes of y's distinct storages (x_{i+1});
//      fwd tmp under grad = P - M_after.
//   2. Allocate the seed d_{i+1} (ones shaped like each tensor of y), then run the
//      stage's backward as the executor does (model::backward_stage: retain_graph
//      false, which frees each saved tensor as its node runs; a carried tensor's
//      gradient handed to its input's) into d_i. bwd_tmp_bytes = P - M_before -
//      (x_i - c_{i+1}), where M_before holds a_i, ā_{i+1} and d_{i+1}: the
//      simulator's `bwd i` peak is "resident after adding the new part of d_i" +
//      btmp_i = M_before + x_i - c_{i+1} + btmp_i = P exactly. For i = 0 no d_0
//      exists (token ids get no gradient) but subtracting its x_0 anyway keeps that
//      peak exact too. Not clamped at 0: Note [A backward may peak below its
//      gradient] in solver/chain/chain.h.
//   3. Without grad (fwd_ckpt / fwd_drop) y' = stage(x); fwd tmp without grad =
//      P - M_after. fwd_tmp_bytes = the larger of the two fwd tmps, because the base format
//      has one ftmp for all three forward ops: Note [One forward tmp is not enough].
// Parameter gradients are not activations: they are allocated (zeros) before the
// first measurement and only zeroed in place afterwards, never reset to undefined,
// so AccumulateGrad adds into existing storage and they sit in every M_before. The
// transient weight gradients a backward computes before accumulating them (the
// embedding's dense V x C gradient, each Linear's dW) do count in btmp: training
// allocates them too. An executor that wants its measured peak to match must also
// allocate the gradients before taking its baseline (an undefined .grad makes the
// first backward keep its weight-gradient tensor as .grad, which then looks like
// activation growth), run `bwd i` through the same backward call on a detached
// input, and hold d_{i+1} and ā_{i+1} until it returns.
// The loss: when the model ends with its loss, a_L is the scalar loss (4 bytes) and
// the loss op only creates the 4-byte seed d_L, so ub_L = btmp_L = 0. Targets, like
// parameters, exist before the step and are not activations; a_0 is (input_bytes).
// What the CPU counter cannot see: memory that kernels take outside c10's allocator
// (oneDNN/MKL scratch); measured twice it is the same, and a GPU meter reading the
// caching allocator's allocated bytes has the same blind spot for cuBLAS workspaces.

// Note [One forward tmp is not enough]
// Under autograd a stage's transients sit above ā_{i+1}; without grad they sit above
// a_{i+1} and include everything autograd would have saved but the code is still
// holding (for explicit attention with dropout: the probabilities, the mask, the
// dropped-out copy). So fwd_tmp without grad is far larger than with it, while the
// absolute peak is smaller. One number cannot be exact for both: the max (written
// as fwd_tmp_bytes) never under-predicts, but over-predicts every fwd_keep peak by
// the difference. tests/profiler/replay_test.cpp replays store_all, recompute_all,
// recompute_blocks and sqrt on GPT-2: the simulator with the max alone predicts
// 1.00-1.37x the measured peak; the same simulator with fwd_keep using
// fwd_tmp_grad_bytes and fwd_ckpt/fwd_drop using fwd_tmp_nograd_bytes predicts
// every peak to the byte. Both are written per stage as extra fields of
// profile.json, and fwd_keep_tmp_bytes carries the first to the simulators (docs/formats.md,
// "Per-stage fields").

// Note [One compute thread]
// Times are taken with at::set_num_threads(threads), 1 by default: in this testbed
// one CPU thread plays the GPU's compute stream and other cores play copy engines.

struct ProfileOptions {
  int repeat = 5;   // measured runs per stage; times are their medians
  int warmup = 1;   // unmeasured runs first (first calls allocate lazily)
  int threads = 1;  // Note [One compute thread]
  // Called with (0, number of stages) first and after each stage with (stages done,
  // number of stages), for progress bars.
  std::function<void(int, int)> on_progress;
  // When set, each measured run of a stage op sits in a range memopt/<op>/<stage>
  // (op: fwd_keep, bwd, fwd_nograd), so a device tracer attributes its kernels and
  // Nsight Systems shows the protocol. Not owned.
  measure::StageTracer* tracer = nullptr;
};

// What was measured about a stage beyond the solver's fields.
struct StageDetail {
  double fwd_nograd_ms = 0;           // the forward without grad (fwd_ms is under autograd)
  int64_t fwd_tmp_grad_bytes = 0;     // step 1's tmp
  int64_t fwd_tmp_nograd_bytes = 0;   // step 3's tmp
  int64_t input_grad_bytes = 0;       // the real d_i (0 for integer a_0)
};

struct Measurement {
  solver::Chain chain;
  std::vector<StageDetail> details;  // one per stage
};

// Runs the protocol of Note [Stage byte accounting] on every stage. Leaves the model in
// training mode as it found it, parameter gradients zeroed (or undefined if they
// were), and the thread count restored.
Measurement measure_chain(model::StagedModel& model, const model::Batch& batch, measure::MemoryMeter& meter, measure::Timer& timer,
                          const ProfileOptions& options);

// Parameters + gradients + AdamW's two moments: 4x the unique parameter bytes.
int64_t static_bytes(const model::StagedModel& model);

// A profile and the per-stage details behind it.
struct MeasuredProfile {
  solver::Profile profile;
  std::vector<StageDetail> details;
};

// measure_chain with the CPU timer and counting allocator, wrapped as a profile:
// model_json describes how to rebuild the model (e.g. gpt2::gpt2_spec_to_json).
MeasuredProfile profile_cpu_detailed(model::StagedModel& model, const model::Batch& batch,
                                     nlohmann::ordered_json model_json, const ProfileOptions& options);
// measure_chain on a backend's timer, memory meter and stage tracer (backend.h); the
// model and batch must already be on that device. `trace` is the device work of
// each stage op as the tracer attributed it (CPU: ranges without device activity).
struct DeviceProfile {
  MeasuredProfile measured;
  measure::TraceReport trace;
};
DeviceProfile profile_on(measure::Backend backend, model::StagedModel& model, const model::Batch& batch,
                         nlohmann::ordered_json model_json, const ProfileOptions& options);
// The same without the details.
solver::Profile profile_cpu(model::StagedModel& model, const model::Batch& batch, nlohmann::ordered_json model_json,
                            const ProfileOptions& options);

// The JSON of docs/formats.md, "profile.json" plus, per stage, "fwd_nograd_ms", "fwd_tmp_grad_bytes" and
// "fwd_tmp_nograd_bytes" (Note [One forward tmp is not enough]); readers that do not
// know them ignore them. Those three follow the documented keys, alphabetically.
nlohmann::ordered_json profile_json(const MeasuredProfile& measured);

}  // namespace memopt::profiler

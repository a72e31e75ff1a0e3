// executor.h: replays a schedule (docs/formats.md, "Operations and memory without offload: the
// sequential simulator") on a StagedModel for one training
// step -- forward ops with or without autograd, recomputations that restore the RNG
// state of the first run, and per-stage backward from the gradient of the output.
// It never decides anything: the solver does, and the schedule says.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "measure/stage_tracer.h"
#include "model/staged_model.h"
#include "runtime/copy_engine.h"
#include "runtime/autocast_state.h"
#include "runtime/rng_state.h"
#include "runtime/saved_state.h"
#include "runtime/storage_move.h"
#include "solver/chain/schedule.h"

namespace memopt::runtime {

// Called around every stage's forward (first run and recomputations alike) and
// backward, so that an engine can bring in what the stage needs and release it after
// -- ZeRO-3 gathers the stage's parameters here and frees them, ZeRO-2/3 reduce-
// scatter the gradients a backward has completed (distributed/zero.h).
class StageHooks {
 public:
  virtual ~StageHooks() = default;
  virtual void before_forward(int stage) {}
  virtual void after_forward(int stage) {}
  virtual void before_backward(int stage) {}
  virtual void after_backward(int stage) {}
};

struct ExecutorOptions {
  // Note [Recompute RNG]: a recomputed forward must draw the same dropout masks as
  // its first run, so the state of every generator it may draw from (rng_state.h:
  // the CPU's, and the compute device's on a GPU) is captured before each stage's
  // first forward and restored (then put back) around every recomputation. Only
  // tests turn this off, to show that it matters.
  bool restore_rng = true;
  // Runs `offload` / `prefetch` ops; schedules with such ops need one. Not owned.
  CopyEngine* copy_engine = nullptr;
  // Not owned; may be null.
  StageHooks* hooks = nullptr;
  // solver::SimResult::offload_done_before for these ops. Note [Offloads end when
  // the simulator says]: the runner holds the device bytes of each offload until the
  // op the simulator had finished it by, and waits for its copy there, so that a copy
  // running late (a busy machine) costs time, never memory, and one running early
  // frees nothing sooner than predicted: the device's memory follows the prediction
  // byte for byte. Empty: never wait; a device copy goes when its copy ends.
  std::vector<int> offload_done_before;
  // When set, every op runs inside a range memopt/<op word>/<stage or a_k> (NVTX and
  // CUPTI attribution on CUDA), so a timeline reads like the schedule. Not owned.
  measure::StageTracer* tracer = nullptr;
};

// What the copies of one step cost: `copy_ms` is the links' busy time, `stall_ms`
// the part the compute thread waited for (exposed); the rest was hidden.
struct CopyStats {
  int num_offloads = 0;
  int num_prefetches = 0;
  double copy_ms = 0;
  double stall_ms = 0;
};

// One step's replay. Split in two so that a custom autograd function can return
// a_L from forward() and run the rest from backward() (optimize/optimize.h); a plain
// step calls both.
class ScheduleRunner {
 public:
  // Throws std::invalid_argument when the ops do not fit the model (stage count,
  // op validity per docs/formats.md, "Operations and memory without offload: the sequential
  // simulator" -- checked by the solver's simulator up front).
  ScheduleRunner(const model::StagedModel& model, std::vector<solver::Op> ops, ExecutorOptions options = {});

  // Runs every op before `loss` and returns a_L: the loss itself for models that end
  // with their loss. The runner holds the batch until run_backward ends, and a_0 only
  // as the schedule says: a caller that keeps no other handle on batch.input lets an
  // `offload 0` free it, as the simulator assumes (Note [The step owns a_0] in
  // train_step.cpp).
  at::Tensor run_forward(model::Batch batch);
  // Runs `loss` with d_L = grad_output (ones for a scalar loss when undefined) and
  // everything after it. Parameter gradients accumulate into .grad; returns d_0, or
  // an undefined tensor when a_0 is not differentiable (token ids).
  at::Tensor run_backward(const at::Tensor& grad_output = {});

  const CopyStats& copy_stats() const { return copy_stats_; }

 private:
  model::Activation input_of(int i);
  void copy_op(const solver::Op& op, size_t p);
  void wait_offloads_due(size_t q);
  void wait_for_offloads();  // wait_offloads
  void forward_op(const solver::Op& op);
  void backward_op(int i);
  model::Activation run_stage(int i, const model::Activation& input, bool with_grad);
  model::Activation run_stage_unhooked(int i, const model::Activation& input, bool with_grad);
  void run_op(const solver::Op& op);  // a forward, bwd or copy op inside its tracer range
  const at::Tensor& last_activation() const;  // a_L, which must be one tensor

  const model::StagedModel& model_;
  std::vector<solver::Op> ops_;
  ExecutorOptions options_;
  size_t next_op_ = 0;
  c10::Device compute_device_{c10::kCPU};  // the batch input's, set by run_forward
  model::Batch batch_;  // targets for the loss stage; its input moves to plain_[0]
  // Note [Multi-tensor activations] in model/staged_model.h: each a_k is a list.
  std::vector<model::Activation> plain_;       // a_k
  std::vector<model::Activation> saved_leaf_;  // ā_k: the detached input of stage k-1, requiring grad
  std::vector<model::Activation> saved_out_;   // ā_k: a_k with its graph
  std::vector<model::Activation> grad_;        // d_k
  std::vector<std::optional<RngState>> rng_state_;  // per stage, from its first forward
  std::vector<AutocastState> autocast_;              // likewise (Note [Recompute under the forward's autocast])
  std::vector<std::vector<std::shared_ptr<Transfer>>> offloaded_;  // a_k on the host, a copy per tensor
  std::vector<std::vector<std::shared_ptr<Transfer>>> arriving_;   // a_k being prefetched
  std::vector<std::shared_ptr<Transfer>> all_copies_;  // for the step's CopyStats
  std::vector<std::shared_ptr<Transfer>> unwaited_offloads_;  // issued since the last wait_offloads
  // ā_k whose saved state the schedule moves (offload_saved k), captured at fwd_keep.
  std::vector<char> moves_saved_;
  std::shared_ptr<const std::unordered_set<const void*>> static_storages_;
  std::vector<std::unique_ptr<SavedState>> saved_state_;
  // a_k's own storages (offload_input k) and its ending carry's (offload_carried k) on
  // their way out or back.
  std::vector<std::unique_ptr<StorageMove>> input_move_, carry_move_;
  std::vector<std::unique_ptr<StorageMove>>& storage_moves(solver::OpKind kind);
  // How many leading tensors of a_k are a_{k-1}'s, passed through (Note [Multi-tensor
  // activations]), as the last forward of stage k-1 returned them.
  std::vector<size_t> carried_count_;
  std::vector<std::vector<int>> due_before_;  // per op q: the offload ops to finish first
  // Per offload op p: its device tensors and copies, held until its due op.
  std::vector<std::vector<OutboundCopy>> outbound_;
  CopyStats copy_stats_;
};



// Checks that a schedule was made for this model (chain_length, op validity) and
// throws std::invalid_argument naming both counts and the command that regenerates
// the schedule.
void check_schedule_fits_model(const solver::Schedule& schedule, const model::StagedModel& model,
                               const std::string& schedule_source = "the schedule");

}  // namespace memopt::runtime

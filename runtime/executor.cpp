// executor.cpp: ScheduleRunner.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include <ATen/core/grad_mode.h>

namespace memopt::runtime {
namespace {

using solver::Op;
using solver::OpKind;

// The leading tensors of `output` that are `input`'s, passed through (Note
// [Multi-tensor activations]): they share their storages.
size_t num_carried(const model::Activation& input, const model::Activation& output) {
  size_t n = 0;
  while (n < input.size() && n < output.size() && input[n].defined() && output[n].defined() &&
         input[n].storage().unsafeGetStorageImpl() == output[n].storage().unsafeGetStorageImpl())
    ++n;
  return n;
}

std::string op_text(const Op& op, size_t p) {
  return "op " + std::to_string(p) + " (" + solver::to_string(op) + ")";
}

}  // namespace

ScheduleRunner::ScheduleRunner(const model::StagedModel& model, std::vector<Op> ops, ExecutorOptions options)
    : model_(model), ops_(std::move(ops)), options_(options) {
  const int L = model_.num_stages();
  plain_.resize(L + 2);
  saved_leaf_.resize(L + 2);
  saved_out_.resize(L + 2);
  grad_.resize(L + 2);
  rng_state_.resize(L);
  autocast_.resize(L);
  offloaded_.resize(L + 2);
  arriving_.resize(L + 2);
  due_before_.resize(ops_.size());
  outbound_.resize(ops_.size());
  input_move_.resize(L + 2);
  carry_move_.resize(L + 2);
  carried_count_.assign(L + 2, 0);
  for (size_t p = 0; p < options_.offload_done_before.size() && p < ops_.size(); ++p) {
    const int q = options_.offload_done_before[p];
    if (q > static_cast<int>(p) && q < static_cast<int>(ops_.size())) due_before_[q].push_back(static_cast<int>(p));
  }
  moves_saved_.assign(L + 2, 0);
  saved_state_.resize(L + 2);
  for (size_t p = 0; p < ops_.size(); ++p) {
    const Op& op = ops_[p];
    const bool copy = solver::is_copy(op.kind);
    if (copy && !options_.copy_engine)
      throw std::invalid_argument(op_text(op, p) + ": offloading needs a copy engine (memopt run gives one; the "
                                  "profile must have a link); or solve with --solver recompute-only");
    const int last = copy ? L : L - 1;
    if (solver::info(op.kind).has_index && (op.index < 0 || op.index > last))
      throw std::invalid_argument(op_text(op, p) + ": index out of range for a model of " + std::to_string(L) + " stages");
    if (op.kind == OpKind::OffloadSaved) moves_saved_[op.index] = 1;
  }
  if (std::find(moves_saved_.begin(), moves_saved_.end(), 1) != moves_saved_.end()) {
    // Note [Capturing saved tensors from C++]: parameters and buffers never move.
    install_saved_state_engine();
    std::vector<at::Tensor> fixed = model_.parameters();
    for (const at::Tensor& b : model_.module().buffers(/*recurse=*/true)) fixed.push_back(b);
    static_storages_ = static_storages_of(fixed);
  }
}

std::vector<std::unique_ptr<StorageMove>>& ScheduleRunner::storage_moves(OpKind kind) {
  return kind == OpKind::OffloadInput || kind == OpKind::PrefetchInput ? input_move_ : carry_move_;
}

model::Activation ScheduleRunner::input_of(int i) {
  if (!arriving_[i].empty()) {
    // The compute stream waits here for a prefetch still in flight: exposed copy time.
    const auto start = std::chrono::steady_clock::now();
    plain_[i].clear();
    for (const auto& t : arriving_[i]) plain_[i].push_back(t->take_device_tensor());
    copy_stats_.stall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    arriving_[i].clear();
  }
  if (!plain_[i].empty()) return plain_[i];
  if (!saved_out_[i].empty()) return model::detached_leaves(saved_out_[i], /*with_grad=*/false);
  throw std::logic_error("executor: the input of stage " + std::to_string(i) + " is not resident");
}

void ScheduleRunner::wait_offloads_due(size_t q) {
  if (q >= due_before_.size() || due_before_[q].empty()) return;
  const auto start = std::chrono::steady_clock::now();
  // Note [Offloads end when the simulator says]: by op q the simulator had finished
  // these copies and freed their device bytes; so does the runner, waiting if needed.
  // The copies are kept per op, not per tensor: a prefetch of the same tensor may have
  // been issued since.
  for (const int p : due_before_[q]) {
    for (const OutboundCopy& c : outbound_[p]) c.transfer->wait();
    outbound_[p].clear();
    if (const Op& op = ops_[p]; op.kind == OpKind::OffloadInput || op.kind == OpKind::OffloadCarried)
      if (const auto& move = storage_moves(op.kind)[op.index]) move->release();
  }
  copy_stats_.stall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void ScheduleRunner::wait_for_offloads() {
  // Note [Waiting for the offloads] (solver/chain/simulate.h). Their device bytes go when
  // each copy ends, or at their due op when the runner holds them (the simulator puts
  // that at or before the next op: nothing allocates before this wait ends).
  const auto start = std::chrono::steady_clock::now();
  for (const std::shared_ptr<Transfer>& t : unwaited_offloads_) t->wait();
  unwaited_offloads_.clear();
  copy_stats_.stall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void ScheduleRunner::copy_op(const Op& op, size_t p) {
  const int k = op.index;
  // Without the simulator's finishing points the engine alone decides when device
  // bytes go (when their copy ends).
  const bool hold = !options_.offload_done_before.empty();
  switch (op.kind) {
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
      if (!saved_state_[k]) throw std::logic_error("executor: " + solver::to_string(op) + " without a captured ā_" + std::to_string(k));
      if (op.kind == OpKind::OffloadSaved) {
        std::vector<OutboundCopy> copies = saved_state_[k]->offload(*options_.copy_engine);
        for (const OutboundCopy& c : copies) unwaited_offloads_.push_back(c.transfer);
        if (hold) outbound_[p] = std::move(copies);
        ++copy_stats_.num_offloads;
      } else {
        saved_state_[k]->prefetch(*options_.copy_engine);
        ++copy_stats_.num_prefetches;
      }
      return;
    case OpKind::OffloadInput:
    case OpKind::OffloadCarried: {
      // Note [Moving bytes from under their holders] (storage_move.h): the tensors of a_k
      // that neither neighbour passes through, or those a_{k-1} passed in that a_{k+1}
      // does not pass on (Note [Carried bytes may leave] in solver/chain/simulate.h).
      const model::Activation& a = plain_[k].empty() ? saved_out_[k] : plain_[k];
      if (a.empty() || saved_out_[k + 1].empty())
        throw std::logic_error("executor: " + solver::to_string(op) + " without a_" + std::to_string(k) + " and ā_" +
                               std::to_string(k + 1) + " resident");
      const size_t passed_in = std::min(a.size(), carried_count_[k]), passed_on = std::min(a.size(), carried_count_[k + 1]);
      const size_t from = op.kind == OpKind::OffloadInput ? std::max(passed_in, passed_on) : passed_on;
      const size_t to = op.kind == OpKind::OffloadInput ? a.size() : std::max(passed_in, passed_on);
      auto& move = storage_moves(op.kind)[k];
      move = std::make_unique<StorageMove>(model::Activation(a.begin() + static_cast<std::ptrdiff_t>(from),
                                                             a.begin() + static_cast<std::ptrdiff_t>(to)),
                                           *options_.copy_engine);
      for (const auto& t : move->transfers()) unwaited_offloads_.push_back(t);
      if (!hold) move->release();  // else at its due op (wait_offloads_due)
      ++copy_stats_.num_offloads;
      return;
    }
    case OpKind::PrefetchInput:
    case OpKind::PrefetchCarried: {
      const auto& move = storage_moves(op.kind)[k];
      if (!move) throw std::logic_error("executor: " + solver::to_string(op) + ", but nothing of a_" + std::to_string(k) + " went to the host");
      move->prefetch(*options_.copy_engine);
      ++copy_stats_.num_prefetches;
      return;
    }
    case OpKind::Offload:
      if (plain_[k].empty()) throw std::logic_error("executor: offload of a_" + std::to_string(k) + ", which is not resident");
      for (const at::Tensor& t : plain_[k]) {
        const at::Tensor device = t.contiguous();
        offloaded_[k].push_back(options_.copy_engine->offload(device));
        if (hold) outbound_[p].push_back({device, offloaded_[k].back()});
        all_copies_.push_back(offloaded_[k].back());
        unwaited_offloads_.push_back(offloaded_[k].back());
      }
      plain_[k].clear();  // the engine holds them until their copies end
      ++copy_stats_.num_offloads;
      return;
    case OpKind::Prefetch:
      if (offloaded_[k].empty()) throw std::logic_error("executor: prefetch of a_" + std::to_string(k) + ", which is not on the host");
      for (const auto& host : offloaded_[k]) {
        arriving_[k].push_back(options_.copy_engine->prefetch(host));
        all_copies_.push_back(arriving_[k].back());
      }
      offloaded_[k].clear();
      ++copy_stats_.num_prefetches;
      return;
    case OpKind::FwdKeep:
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop:
    case OpKind::Loss:
    case OpKind::Bwd:
    case OpKind::WaitOffloads: throw std::logic_error("executor: " + solver::to_string(op) + " is not a copy");
  }
}

model::Activation ScheduleRunner::run_stage(int i, const model::Activation& input, bool with_grad) {
  if (!options_.hooks) return run_stage_unhooked(i, input, with_grad);
  options_.hooks->before_forward(i);
  model::Activation out = run_stage_unhooked(i, input, with_grad);
  options_.hooks->after_forward(i);
  return out;
}

model::Activation ScheduleRunner::run_stage_unhooked(int i, const model::Activation& input, bool with_grad) {
  at::AutoGradMode grad_mode(with_grad);
  if (!options_.restore_rng) return model_.forward_stage(i, input, batch_);
  if (!rng_state_[i]) {
    rng_state_[i] = rng_state(compute_device_);
    autocast_[i] = autocast_state();
    return model_.forward_stage(i, input, batch_);
  }
  RngStateScope scope(*rng_state_[i]);
  AutocastScope autocast(autocast_[i]);
  return model_.forward_stage(i, input, batch_);
}

void ScheduleRunner::forward_op(const Op& op) {
  const int i = op.index;
  if (op.kind == OpKind::FwdKeep) {
    // Detached leaves so that this stage's backward stops at its input and hands the
    // input's gradient over as d_i.
    model::Activation leaves = model::detached_leaves(input_of(i));
    if (moves_saved_[i + 1]) {
      // Capture what this stage saves, so offload_saved can move it (its input and
      // output stay: the hollow ā_{i+1} keeps a_{i+1}).
      saved_state_[i + 1] = std::make_unique<SavedState>(static_storages_, compute_device_);
      {
        CaptureScope capture(*saved_state_[i + 1]);
        saved_out_[i + 1] = run_stage(i, leaves, /*with_grad=*/true);
      }
      for (const at::Tensor& t : leaves) saved_state_[i + 1]->keep_on_device(t);
      for (const at::Tensor& t : saved_out_[i + 1]) saved_state_[i + 1]->keep_on_device(t);
      // The targets and the step's inputs live for the whole step, outside the budget
      // (a_0 is plain_[0]).
      saved_state_[i + 1]->keep_on_device(batch_.targets);
      for (const at::Tensor& t : batch_.step_inputs) saved_state_[i + 1]->keep_on_device(t);
    } else {
      saved_out_[i + 1] = run_stage(i, leaves, /*with_grad=*/true);
    }
    carried_count_[i + 1] = num_carried(leaves, saved_out_[i + 1]);
    saved_leaf_[i + 1] = std::move(leaves);
    return;
  }
  const model::Activation input = input_of(i);
  plain_[i + 1] = run_stage(i, input, /*with_grad=*/false);
  carried_count_[i + 1] = num_carried(input, plain_[i + 1]);
  if (op.kind == OpKind::FwdDrop) plain_[i].clear();
}

void ScheduleRunner::backward_op(int i) {
  model::Activation& out = saved_out_[i + 1];
  model::Activation& leaves = saved_leaf_[i + 1];
  if (out.empty() || grad_[i + 1].empty())
    throw std::logic_error("executor: bwd " + std::to_string(i) + " without ā or d of its output");
  if (options_.hooks) options_.hooks->before_backward(i);
  // A prefetch_saved still in flight: the compute thread waits (exposed copy time).
  if (saved_state_[i + 1]) copy_stats_.stall_ms += saved_state_[i + 1]->wait_on_device();
  // So does a prefetch_input or prefetch_carried of its input (ā_{i+1}'s came back
  // before bwd i+1).
  for (auto* moves : {&input_move_, &carry_move_}) {
    if (std::unique_ptr<StorageMove>& move = (*moves)[i]) {
      copy_stats_.stall_ms += move->restore();
      for (const auto& t : move->transfers()) all_copies_.push_back(t);
      move.reset();
    }
  }
  model::Activation d_in = model::backward_stage(out, leaves, grad_[i + 1]);
  out.clear();
  leaves.clear();
  if (saved_state_[i + 1]) {
    for (const auto& t : saved_state_[i + 1]->transfers()) all_copies_.push_back(t);
    saved_state_[i + 1].reset();
  }
  grad_[i + 1].clear();
  plain_[i].clear();  // a plain input is consumed; an ā_i stays for bwd i-1
  grad_[i] = std::move(d_in);
  if (options_.hooks) options_.hooks->after_backward(i);
}

void ScheduleRunner::run_op(const Op& op) {
  const bool copy = solver::is_copy(op.kind);
  std::optional<measure::StageRange> range;
  if (options_.tracer) {
    // Copies name the activation a_k they move; compute ops name their stage; a wait
    // names nothing.
    std::string what;
    if (copy) what = "a" + std::to_string(op.index);
    else if (solver::info(op.kind).has_index) what = model_.stage(op.index).name;
    range.emplace(options_.tracer, std::string(solver::info(op.kind).word), what);
  }
  switch (op.kind) {
    case OpKind::FwdKeep:
    case OpKind::FwdCkpt:
    case OpKind::FwdDrop: forward_op(op); return;
    case OpKind::Bwd: backward_op(op.index); return;
    case OpKind::WaitOffloads: wait_for_offloads(); return;
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::OffloadInput:
    case OpKind::PrefetchInput:
    case OpKind::OffloadCarried:
    case OpKind::PrefetchCarried: copy_op(op, next_op_); return;
    case OpKind::Loss: throw std::logic_error("executor: the loss runs between run_forward and run_backward");
  }
}

at::Tensor ScheduleRunner::run_forward(model::Batch batch) {
  batch_ = std::move(batch);
  compute_device_ = batch_.input.device();
  plain_[0] = {std::move(batch_.input)};  // leaves batch_.input undefined
  for (; next_op_ < ops_.size() && ops_[next_op_].kind != OpKind::Loss; ++next_op_) {
    const Op& op = ops_[next_op_];
    if (op.kind == OpKind::Bwd) throw std::invalid_argument(op_text(op, next_op_) + ": bwd before loss");
    wait_offloads_due(next_op_);
    run_op(op);
  }
  if (next_op_ == ops_.size()) throw std::invalid_argument("the schedule has no loss op");
  return last_activation().detach();
}

const at::Tensor& ScheduleRunner::last_activation() const {
  const int L = model_.num_stages();
  const model::Activation& a = plain_[L].empty() ? saved_out_[L] : plain_[L];
  if (a.size() != 1)
    throw std::invalid_argument("executor: the last stage returned " + std::to_string(a.size()) +
                                " tensors; a chain (or a pipeline stage) must end where one tensor is passed");
  return a[0];
}

at::Tensor ScheduleRunner::run_backward(const at::Tensor& grad_output) {
  const int L = model_.num_stages();
  if (next_op_ >= ops_.size() || ops_[next_op_].kind != OpKind::Loss)
    throw std::logic_error("executor: run_backward before run_forward");
  wait_offloads_due(next_op_);  // the loss op
  grad_[L] = {grad_output.defined() ? grad_output : at::ones_like(last_activation())};
  plain_[L].clear();
  for (++next_op_; next_op_ < ops_.size(); ++next_op_) {
    const Op& op = ops_[next_op_];
    if (op.kind == OpKind::Loss) throw std::invalid_argument(op_text(op, next_op_) + ": a second loss");
    wait_offloads_due(next_op_);
    run_op(op);
  }
  at::Tensor d0 = grad_[0].empty() ? at::Tensor() : grad_[0][0];
  outbound_.assign(ops_.size(), {});  // offloads the simulator finished only after the last op
  unwaited_offloads_.clear();
  if (options_.copy_engine) {
    options_.copy_engine->finish_step();
    for (const auto& t : all_copies_) copy_stats_.copy_ms += t->copy_ms();
    all_copies_.clear();
  }
  plain_.assign(L + 2, {});
  grad_.assign(L + 2, {});
  batch_ = model::Batch{};
  return d0;
}

void check_schedule_fits_model(const solver::Schedule& schedule, const model::StagedModel& model,
                               const std::string& schedule_source) {
  if (schedule.chain_length != model.num_stages())
    throw std::invalid_argument(schedule_source + ": chain_length is " + std::to_string(schedule.chain_length) +
                                " but the model has " + std::to_string(model.num_stages()) +
                                " stages; regenerate the schedule for this model with `memopt solve --profile "
                                "P.json --budget B --out S.json` on a profile of this model");
}

}  // namespace memopt::runtime

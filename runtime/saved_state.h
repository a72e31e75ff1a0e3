// saved_state.h: the tensors one stage's autograd graph saves for backward, captured
// as they are saved so that the executor can move them to the host and back
// (`offload_saved` / `prefetch_saved`, Note [Offloading saved state] in
// solver/chain/simulate.h) -- in C++, without Python's saved_tensors_hooks.
//
// Note [Capturing saved tensors from C++]
// LibTorch asks the default autograd engine for hooks each time a SavedVariable is
// made (Engine::get_default_saved_variable_hooks, virtual; Python's engine answers
// with its saved_tensors_hooks). install_saved_state_engine() makes a subclass of
// Engine the default through set_default_engine_stub; it answers with memopt's hooks
// while a CaptureScope is open on the calling thread and otherwise asks the engine
// that was the default before, so every other graph is built exactly as before -- in
// a Python process that is Python's engine, whose saved_tensors_hooks (what
// torch.utils.checkpoint without reentrancy and save_on_cpu are built on) must keep
// working after memopt moved saved state once. The hooks do not hold the tensors:
// they hold views (sizes, strides, offset) into per-storage slots, which SavedState
// owns and can swap between the device and a host copy. Storages that must stay --
// parameters and buffers (static memory), the stage's input and output (a_i and
// a_{i+1}, which stay on the device), the batch's targets and step inputs (a
// decoder's rotary tables, which every layer saves: model::Batch) -- are left in
// place, and so are tensors the graph saved on another device than the one it
// computes on (Note [Host scalars stay]).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "runtime/copy_engine.h"

namespace memopt::runtime {

// Idempotent; call before building graphs whose saved state may move.
void install_saved_state_engine();

class SavedState {
 public:
  // `static_storages`: storages never to move (parameters, buffers), keyed by
  // StorageImpl address (see static_storages_of). `compute_device`: the device the
  // stage computes on; only saved tensors there move.
  SavedState(std::shared_ptr<const std::unordered_set<const void*>> static_storages, c10::Device compute_device);
  ~SavedState();
  SavedState(const SavedState&) = delete;
  SavedState& operator=(const SavedState&) = delete;

  // After the stage ran: its input and output stay on the device.
  void keep_on_device(const at::Tensor& tensor);
  // Bytes of the distinct storages that offload() moves.
  int64_t movable_bytes() const;
  int num_movable_storages() const;

  // Queue every movable storage to the host; the device copies are freed as their
  // copies end, unless the caller keeps the returned device tensors longer. Then bring
  // them back (allocated now, copied after the offloads).
  std::vector<OutboundCopy> offload(CopyEngine& engine);
  void prefetch(CopyEngine& engine);
  // Blocks until a prefetch has landed, so that backward can unpack; returns the
  // time waited (exposed copy time) in ms.
  double wait_on_device();
  // Every copy this state made (for the step's CopyStats).
  const std::vector<std::shared_ptr<Transfer>>& transfers() const;

  struct Impl;
 private:
  std::shared_ptr<Impl> impl_;
  friend class CaptureScope;
};

// While alive, tensors saved for backward on this thread are captured into `state`.
class CaptureScope {
 public:
  explicit CaptureScope(SavedState& state);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  std::shared_ptr<SavedState::Impl> previous_;
};

// The storages of these tensors, for SavedState's constructor.
std::shared_ptr<const std::unordered_set<const void*>> static_storages_of(const std::vector<at::Tensor>& tensors);

}  // namespace memopt::runtime

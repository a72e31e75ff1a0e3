// storage_move.h: `offload_input` / `prefetch_input` and `offload_carried` /
// `prefetch_carried` in the runtime -- the bytes of some storages moved to the host and
// back while every tensor viewing them stays (Notes [A kept stage's input may leave]
// and [Carried bytes may leave] in solver/chain/simulate.h).
//
// Note [Moving bytes from under their holders]
// A kept stage's input is held by more than the executor: the detached leaf autograd
// accumulates its gradient into, the tensors the stage's graph saved (and, when the
// previous stage was kept too, its output and what its graph saved). Dropping the
// executor's references would free nothing. What all of them share is the storage,
// so the storage itself gives up its bytes: once the copy to the host has ended, its
// data pointer is set to null (the device bytes go back to the allocator), and when
// the copy back has landed, the storage takes the new device buffer's data pointer.
// Every tensor keeps its identity, sizes, strides and version counter, so autograd
// finds the same saved tensors, with the same bytes, when the backward runs. Nothing
// may read the storages in between, which the simulator guarantees for the ops it
// accepts.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "runtime/copy_engine.h"

namespace memopt::runtime {

class StorageMove {
 public:
  // Queues the copy of each distinct storage of `tensors` (undefined ones skipped) to
  // the host; the device bytes stay until release().
  StorageMove(const std::vector<at::Tensor>& tensors, CopyEngine& engine);
  StorageMove(const StorageMove&) = delete;
  StorageMove& operator=(const StorageMove&) = delete;

  // Waits for the copies to the host, then frees the device bytes. Idempotent.
  void release();
  // Allocates the device buffers now and queues the copies back.
  void prefetch(CopyEngine& engine);
  // Waits for the copies back and hands the buffers to the storages (releasing the
  // old bytes first if release() was not called); returns the time waited in ms.
  double restore();
  // Every copy made so far, for the step's CopyStats.
  std::vector<std::shared_ptr<Transfer>> transfers() const;

 private:
  struct Moved {
    c10::Storage storage;
    std::shared_ptr<Transfer> out, back;
  };
  std::vector<Moved> moved_;
  bool released_ = false;
};

}  // namespace memopt::runtime

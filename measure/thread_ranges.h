// thread_ranges.h: carries the open stage range to every thread that runs ATen ops.
//
// Note [Ranges on every thread]
// A device tracer's ranges are per thread: CUPTI's external correlation ids and NVTX
// ranges live on a stack of the thread that pushed them. Autograd runs a GPU backward
// on a device thread of its own, so a range pushed by the thread that called
// backward() would claim none of that backward's kernels. While a ThreadRanges is
// alive, every ATen op on any thread pushes the open range's id on its own thread's
// stack when it starts (an ATen RecordFunction callback) and pops it when it returns,
// so each kernel an op launches is claimed by the range that was open when the op ran.
// This is exact because memopt opens one range at a time and its host waits for each
// stage op (and for backward()) before opening the next.
#pragma once

#include <cstdint>
#include <functional>

namespace memopt::measure {

class ThreadRanges {
 public:
  // `push` and `pop` run on the thread of the op, around it. One ThreadRanges at a
  // time per process (throws std::logic_error for a second).
  ThreadRanges(std::function<void(uint64_t)> push, std::function<void()> pop);
  ~ThreadRanges();
  ThreadRanges(const ThreadRanges&) = delete;
  ThreadRanges& operator=(const ThreadRanges&) = delete;

  // The range ops now run under; 0: none (ops push nothing).
  void set_open(uint64_t external_id);

  struct State;

 private:
  uint64_t handle_ = 0;
};

}  // namespace memopt::measure

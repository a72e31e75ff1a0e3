// cuda_timer.h: the Timer on CUDA events recorded on the current stream.
// stop_ms() synchronizes on the end event, so it returns the device time of the
// work queued between start() and stop_ms(), not the (asynchronous) launch time.
#pragma once

#include <memory>

#include "measure/timer.h"

namespace memopt::measure::cuda {

std::unique_ptr<Timer> make_cuda_timer(int device_index);

}  // namespace memopt::measure::cuda

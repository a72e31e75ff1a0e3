// cupti_tracer.h: the StageTracer (measure/stage_tracer.h) on CUPTI's activity API
// and NVTX. Around each stage op it pushes a CUPTI external correlation id -- on its
// own thread, and around every ATen op any other thread runs meanwhile (Note [Ranges
// on every thread]: autograd's device thread runs the backward) -- so every kernel and
// copy that op launched can be attributed to it, and an NVTX range named
// memopt/<op>/<stage> (so an Nsight Systems timeline reads like the schedule). Records
// CUPTI drops are counted (TraceReport::num_lost_records). It only converts CUPTI's records into measure/trace.h's structs;
// attribution and the report are device-neutral.
#pragma once

#include <memory>

#include "measure/stage_tracer.h"

namespace memopt::measure::cuda {

// One at a time per process (CUPTI's activity buffers are global); throws
// std::logic_error for a second, std::runtime_error when CUPTI cannot start.
std::unique_ptr<StageTracer> make_cupti_tracer();

}  // namespace memopt::measure::cuda

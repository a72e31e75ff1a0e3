// backend.h: which device memopt measures on, and one factory per measuring
// interface (Timer, MemoryMeter, StageTracer). backend.cpp holds the only #if of
// measure/ (the GPU layer stays thin and optional); the CUDA versions live in measure/cuda/.
#pragma once

#include <memory>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "measure/memory_meter.h"
#include "measure/stage_tracer.h"
#include "measure/timer.h"

namespace memopt::measure {

enum class Backend { Cpu, Cuda };

// "cpu" or "cuda"; throws std::invalid_argument naming the flag's choices.
Backend parse_backend(const std::string& word);
const char* backend_word(Backend backend);
// Whether this memopt was built with the CUDA backend (the `cuda` preset).
bool cuda_backend_built();
// Throws std::invalid_argument naming the fix when `backend` cannot run here: the
// CUDA backend not built, or no CUDA device visible.
void require_backend(Backend backend);

// The device a backend measures and trains on: the CPU, or the current CUDA device
// (index resolved, so that every piece of one run agrees). require_backend() first.
c10::Device backend_device(Backend backend);

// The backend_device's timer, meter and tracer. require_backend() first.
std::unique_ptr<Timer> make_timer(Backend backend);
std::unique_ptr<MemoryMeter> make_memory_meter(Backend backend);  // CPU: the counting allocator
std::unique_ptr<StageTracer> make_stage_tracer(Backend backend);  // CPU: ranges only, no device activity
// The profile's "device": {"kind": "cpu"|"cuda", "name", then the rest alphabetically};
// the CPU's "name" is its model name (common/host.h) and "cores" its hardware threads.
nlohmann::ordered_json device_json(Backend backend, int threads);

}  // namespace memopt::measure

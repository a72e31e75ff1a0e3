// backend.cpp: the profiler's factories -- the only #if MEMOPT_WITH_CUDA of profiler/.
#include "measure/backend.h"

#include <cstdio>
#include <stdexcept>

#include "common/host.h"
#include "measure/cpu_allocator.h"
#if MEMOPT_WITH_CUDA
#include "measure/cuda/cuda_memory_meter.h"
#include "measure/cuda/cuda_timer.h"
#include "measure/cuda/cupti_tracer.h"
#include "measure/cuda/device.h"
#endif

namespace memopt::measure {

Backend parse_backend(const std::string& word) {
  if (word == "cpu") return Backend::Cpu;
  if (word == "cuda") return Backend::Cuda;
  throw std::invalid_argument("--device: '" + word + "' is not a device; use cpu or cuda");
}

const char* backend_word(Backend backend) { return backend == Backend::Cuda ? "cuda" : "cpu"; }

bool cuda_backend_built() {
#if MEMOPT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void require_backend(Backend backend) {
  if (backend == Backend::Cpu) return;
#if MEMOPT_WITH_CUDA
  if (cuda::visible_device_count() == 0)
    throw std::invalid_argument(
        "--device cuda: no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them); "
        "use --device cpu");
#else
  throw std::invalid_argument(
      "--device cuda: this memopt was built without the CUDA backend; run scripts/setup_cuda.sh, then "
      "cmake --preset cuda && cmake --build build-cuda, and use build-cuda/tools/memopt");
#endif
}

c10::Device backend_device(Backend backend) {
  require_backend(backend);
#if MEMOPT_WITH_CUDA
  if (backend == Backend::Cuda)
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(cuda::current_device_index()));
#endif
  return c10::Device(c10::kCPU);
}

std::unique_ptr<Timer> make_timer(Backend backend) {
  require_backend(backend);
#if MEMOPT_WITH_CUDA
  if (backend == Backend::Cuda) return cuda::make_cuda_timer(backend_device(backend).index());
#endif
  return std::make_unique<CpuTimer>();
}

std::unique_ptr<MemoryMeter> make_memory_meter(Backend backend) {
  require_backend(backend);
#if MEMOPT_WITH_CUDA
  if (backend == Backend::Cuda) return cuda::make_cuda_memory_meter(backend_device(backend).index());
#endif
  return std::make_unique<CpuMemoryMeter>();
}

std::unique_ptr<StageTracer> make_stage_tracer(Backend backend) {
  require_backend(backend);
#if MEMOPT_WITH_CUDA
  if (backend == Backend::Cuda) {
    // Note [A profile without CUPTI]: CUPTI allows one subscriber per process, and
    // Nsight Systems or PyTorch's profiler may hold it. The stage times come from CUDA
    // events and the bytes from the allocator, so the profile stays whole; only the
    // per-kernel attribution is missing, and the warning says so.
    try {
      return cuda::make_cupti_tracer();
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "warning: %s; profiling without per-kernel attribution (stage times from CUDA events)\n",
                   e.what());
    }
  }
#endif
  return std::make_unique<StageTracer>();
}

nlohmann::ordered_json device_json(Backend backend, int threads) {
  require_backend(backend);
#if MEMOPT_WITH_CUDA
  if (backend == Backend::Cuda) {
    const int index = backend_device(backend).index();
    return {{"kind", "cuda"}, {"name", cuda::device_name(index)}, {"index", index}, {"threads", threads}};
  }
#endif
  return {{"kind", "cpu"}, {"name", common::cpu_model_name()}, {"cores", common::hardware_threads()}, {"threads", threads}};
}

}  // namespace memopt::measure

// copy_engine_factory.cpp: picks the copy engine by device. The only #if of the
// runtime (the GPU layer stays thin and optional): a CPU-only build never sees a CUDA header.
#include <stdexcept>

#include "runtime/copy_engine.h"
#if MEMOPT_WITH_CUDA
#include "runtime/cuda/cuda_copy_engine.h"
#endif

namespace memopt::runtime {

std::unique_ptr<CopyEngine> make_copy_engine(const c10::Device& device, const CopyEngineOptions& options) {
  if (device.is_cpu()) return std::make_unique<CpuCopyEngine>(options);
  if (device.is_cuda()) {
#if MEMOPT_WITH_CUDA
    return cuda::make_cuda_copy_engine(device.has_index() ? device.index() : 0, options);
#else
    throw std::invalid_argument("copy engine: " + device.str() +
                                " needs the CUDA backend, and this memopt was built without it; build the `cuda` "
                                "preset (cmake --preset cuda, after scripts/setup_cuda.sh)");
#endif
  }
  throw std::invalid_argument("copy engine: no engine for device " + device.str() + "; use cpu or cuda");
}

}  // namespace memopt::runtime

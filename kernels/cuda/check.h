// cuda/check.h: the one error check of the kernel launchers: a failed CUDA call
// throws with the call, file and line, instead of surfacing as a later wrong result.
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#define MEMOPT_CUDA_CHECK(call)                                                                        \
  do {                                                                                                 \
    const cudaError_t memopt_err_ = (call);                                                            \
    if (memopt_err_ != cudaSuccess)                                                                    \
      throw std::runtime_error(std::string(#call) + " failed at " + __FILE__ + ":" +                   \
                               std::to_string(__LINE__) + ": " + cudaGetErrorString(memopt_err_));    \
  } while (0)

namespace memopt::kernels::cuda {
inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
inline unsigned grid_for(int64_t work_items, int threads_per_block) {
  const int64_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}
}  // namespace memopt::kernels::cuda

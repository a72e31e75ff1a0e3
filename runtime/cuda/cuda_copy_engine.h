// cuda_copy_engine.h: the copy engine of runtime/copy_engine.h on a CUDA device --
// one copy stream per direction from c10's stream pool, events for completion and
// timing, one pinned host pool allocated once. Declared here without CUDA headers;
// runtime/copy_engine_factory.cpp is the only caller.
#pragma once

#include <memory>

#include "runtime/copy_engine.h"

namespace memopt::runtime::cuda {

// Throws std::invalid_argument when no CUDA device `device_index` is visible.
std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device_index, const CopyEngineOptions& options);

}  // namespace memopt::runtime::cuda

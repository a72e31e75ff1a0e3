// zero_memory.h: what ZeRO (Rajbhandari et al. 2020) leaves on each rank's device --
// parameters, gradients, AdamW state and communication buffers -- for a chain whose
// stages carry param_bytes/param_reads, and the activation budget that remains.
// Plain arithmetic mirroring distributed/zero.h byte for byte (Note [ZeRO
// buckets]); `memopt plan` prints it and a test compares it with measured bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "solver/chain/chain.h"

namespace memopt::solver {

// Note [ZeRO buckets]
// The parameters homed at chain stage b (Note [Parameter homes]) form bucket b: one
// flat fp32 buffer of n_b elements padded to P_b = ceil(n_b / D) * D, of which rank r
// owns elements [r S_b, (r+1) S_b), S_b = P_b / D. Per rank, persistent:
//   stage 0: parameters P, gradients P, AdamW m and v 2P   (plain data parallel)
//   stage 1: parameters P, gradients P, AdamW 2S           (optimizer state partitioned)
//   stage 2: parameters P, gradients S, AdamW 2S           (+ gradients reduce-scattered)
//   stage 3: parameters S, gradients S, AdamW 2S           (+ parameters partitioned)
// summed over buckets. Transient (communication buffers and gradients not yet
// reduce-scattered): stage 3 gathers the buckets a stage reads (its own and the
// homes it reads) around each forward and backward; stages 2-3 hold full gradients
// of the buckets backward has touched until their home's backward reduce-scatters
// them (a flat copy P_b in, S_b out); the AdamW step needs one temporary of its
// partition; stages 1-2 all-gather updated parameters from a copy of the partition.
struct ZeroBuckets {
  std::vector<int64_t> numel;             // n_b, per chain stage (0: no bucket)
  std::vector<std::vector<int>> reads;    // R_i: buckets stage i reads, its own included
};

// Throws std::invalid_argument naming `source` and the fix when the chain's stages
// lack param_bytes (profiles written before memopt knew parameters).
ZeroBuckets zero_buckets(const Chain& chain, const std::string& source, int64_t bytes_per_element = 4);

struct ZeroMemory {
  int world_size = 1;
  int zero_stage = 0;
  int64_t param_bytes = 0;       // persistent, per rank
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t transient_bytes = 0;   // the largest communication/gradient transient above
  int64_t persistent_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  int64_t static_bytes() const { return persistent_bytes() + transient_bytes; }
};

ZeroMemory zero_memory(const ZeroBuckets& buckets, int world_size, int zero_stage, int64_t bytes_per_element = 4);

}  // namespace memopt::solver

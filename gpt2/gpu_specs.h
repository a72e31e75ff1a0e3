// gpu_specs.h: the one table of GPUs that `memopt estimate` models -- published peak
// throughput per dtype, memory bandwidth and capacity, and the host link -- with the
// datasheet each number comes from. No GPU is needed: these are spec-sheet numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memopt::gpt2 {

// Note [GPU spec sources]
// Peaks are the vendors' dense (no sparsity) numbers for the SXM parts:
//   V100: "NVIDIA Tesla V100 GPU Accelerator" datasheet (SXM2): 15.7 TFLOPS fp32,
//         125 TFLOPS fp16 tensor, 900 GB/s HBM2, 16 or 32 GB. No bf16 (Volta has none).
//   A100: "NVIDIA A100 Tensor Core GPU" datasheet (SXM4): 19.5 TFLOPS fp32 (TF32 off),
//         312 TFLOPS fp16/bf16 tensor dense, 1,555 GB/s (40GB) / 2,039 GB/s (80GB).
//   H100: "NVIDIA H100 Tensor Core GPU" datasheet (SXM5): 67 TFLOPS fp32, 989 TFLOPS
//         fp16/bf16 tensor dense (the 1,979 on the sheet is with sparsity), 3,350 GB/s HBM3.
// fp32 means IEEE fp32 matmuls; with TF32 allowed (torch.backends.cuda.matmul.allow_tf32)
// an A100/H100 runs fp32 matmuls at 156/495 TFLOPS, which this table does not model.
// Host link: the bandwidth one direction of a pinned-memory cudaMemcpyAsync reaches,
// not the bus's theoretical rate: PCIe 3.0 x16 is 15.75 GB/s theoretical, ~12 GB/s
// achieved; PCIe 4.0 x16 31.5 -> ~25; PCIe 5.0 x16 63 -> ~50 (about 80% each).
// Memory is the nominal capacity in GiB; the CUDA context, cuBLAS workspaces and the
// caching allocator's slack take some of it (the fit chart's --reserve).

struct GpuSpec {
  std::string_view word;   // --gpu value
  std::string_view name;   // as the vendor names the part
  int64_t memory_bytes;
  double fp32_flop_per_s;
  double fp16_flop_per_s;  // tensor cores, dense
  double bf16_flop_per_s;  // 0: the GPU has no bf16 arithmetic
  double memory_bytes_per_s;
  double link_bytes_per_s; // achieved host <-> device, each direction
  std::string_view link_name;
};

inline constexpr int64_t kGiB = int64_t{1} << 30;

inline constexpr GpuSpec kGpuSpecs[] = {
    {"v100-16gb", "NVIDIA Tesla V100-SXM2-16GB", 16 * kGiB, 15.7e12, 125e12, 0, 900e9, 12e9, "PCIe 3.0 x16"},
    {"v100-32gb", "NVIDIA Tesla V100-SXM2-32GB", 32 * kGiB, 15.7e12, 125e12, 0, 900e9, 12e9, "PCIe 3.0 x16"},
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 40 * kGiB, 19.5e12, 312e12, 312e12, 1555e9, 25e9, "PCIe 4.0 x16"},
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 80 * kGiB, 19.5e12, 312e12, 312e12, 2039e9, 25e9, "PCIe 4.0 x16"},
    {"h100-80gb", "NVIDIA H100-SXM5-80GB", 80 * kGiB, 67e12, 989e12, 989e12, 3350e9, 50e9, "PCIe 5.0 x16"},
};

// "v100-16gb, v100-32gb, ..." for error messages and --help.
inline std::string gpu_words() {
  std::string out;
  for (const GpuSpec& g : kGpuSpecs) out += (out.empty() ? "" : ", ") + std::string(g.word);
  return out;
}

inline std::optional<GpuSpec> gpu_spec(std::string_view word) {
  for (const GpuSpec& g : kGpuSpecs)
    if (g.word == word) return g;
  return std::nullopt;
}

}  // namespace memopt::gpt2

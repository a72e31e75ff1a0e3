// gpu_specs.h: the one table of GPUs that `memopt estimate` models -- published peak
// throughput per dtype, memory bandwidth and capacity, and the host link -- with the
// datasheet each number comes from. No GPU is needed: these are spec-sheet numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

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
//   GH200: "NVIDIA GH200 Grace Hopper Superchip" datasheet: the H100's 67 TFLOPS fp32
//         and 989 TFLOPS bf16 dense, 96 GB HBM3 at 4,000 GB/s, joined to the Grace CPU
//         by NVLink-C2C (900 GB/s both directions, 450 GB/s each).
// Host link: the bandwidth one direction of a pinned-memory cudaMemcpyAsync reaches,
// not the bus's theoretical rate, about 80% of it: PCIe 3.0 x16 is 15.75 GB/s
// theoretical, ~12 GB/s achieved; PCIe 4.0 x16 31.5 -> ~25; PCIe 5.0 x16 63 -> ~50;
// NVLink-C2C 450 -> ~360 each direction.
// Memory is the nominal capacity in GiB; the CUDA context, cuBLAS workspaces and the
// caching allocator's slack take some of it (the fit chart's --reserve).

// One host <-> device link: the table below, one row per link.
struct LinkSpec {
  std::string_view word;    // as in --emulate GPU:LINK
  std::string_view name;
  double bytes_per_s;       // achieved, each direction
};

inline constexpr LinkSpec kLinkSpecs[] = {
    {"pcie3", "PCIe 3.0 x16", 12e9},
    {"pcie4", "PCIe 4.0 x16", 25e9},
    {"pcie5", "PCIe 5.0 x16", 50e9},
    {"nvlink-c2c", "NVLink-C2C", 360e9},
};

struct GpuSpec {
  std::string_view word;   // --gpu value
  std::string_view name;   // as the vendor names the part
  int64_t memory_bytes;
  double fp32_flop_per_s;
  double fp16_flop_per_s;  // tensor cores, dense
  double bf16_flop_per_s;  // 0: the GPU has no bf16 arithmetic
  double memory_bytes_per_s;
  std::string_view link_word;  // the host link it ships with (kLinkSpecs)
};

inline constexpr int64_t kGiB = int64_t{1} << 30;

inline constexpr GpuSpec kGpuSpecs[] = {
    {"v100-16gb", "NVIDIA Tesla V100-SXM2-16GB", 16 * kGiB, 15.7e12, 125e12, 0, 900e9, "pcie3"},
    {"v100-32gb", "NVIDIA Tesla V100-SXM2-32GB", 32 * kGiB, 15.7e12, 125e12, 0, 900e9, "pcie3"},
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 40 * kGiB, 19.5e12, 312e12, 312e12, 1555e9, "pcie4"},
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 80 * kGiB, 19.5e12, 312e12, 312e12, 2039e9, "pcie4"},
    {"h100-80gb", "NVIDIA H100-SXM5-80GB", 80 * kGiB, 67e12, 989e12, 989e12, 3350e9, "pcie5"},
    {"gh200", "NVIDIA GH200 Grace Hopper (H100 96GB HBM3)", 96 * kGiB, 67e12, 989e12, 989e12, 4000e9, "nvlink-c2c"},
};

// Other words a user may type for a GPU of the table (the compute rate is the same
// for both memory sizes of a part).
inline constexpr std::pair<std::string_view, std::string_view> kGpuAliases[] = {
    {"v100", "v100-32gb"}, {"a100", "a100-80gb"}, {"h100", "h100-80gb"}, {"h100-sxm", "h100-80gb"},
};

inline std::string gpu_words() {
  std::string out;
  for (const GpuSpec& g : kGpuSpecs) out += (out.empty() ? "" : ", ") + std::string(g.word);
  return out;
}

inline std::optional<GpuSpec> gpu_spec(std::string_view word) {
  for (const auto& [alias, target] : kGpuAliases)
    if (alias == word) word = target;
  for (const GpuSpec& g : kGpuSpecs)
    if (g.word == word) return g;
  return std::nullopt;
}

inline std::string link_words() {
  std::string out;
  for (const LinkSpec& l : kLinkSpecs) out += (out.empty() ? "" : ", ") + std::string(l.word);
  return out;
}

inline std::optional<LinkSpec> link_spec(std::string_view word) {
  for (const LinkSpec& l : kLinkSpecs)
    if (l.word == word) return l;
  return std::nullopt;
}

// The link a GPU of the table ships with.
inline LinkSpec gpu_link(const GpuSpec& gpu) { return *link_spec(gpu.link_word); }

}  // namespace memopt::gpt2

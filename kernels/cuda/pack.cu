// cuda/pack.cu: the CUDA pack/unpack of kernels/pack.h. The layout comes from the
// device-neutral pack_layout(); one launch moves the whole group, blockIdx.y picking
// the item, using the header's float_to_bf16 so the bits match the CPU version
// (kernels/cpu/pack.cpp is its tested twin).
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/pack.h"

namespace memopt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

enum Mode : int { kCopyWords = 0, kCopyBytes = 1, kToBf16 = 2, kFromBf16 = 3 };

struct Desc {
  const void* src;
  void* dst;
  int64_t count;  // words, bytes or elements, as the mode says
  int mode;
};

__global__ void pack_kernel(const Desc* __restrict__ descs) {
  const Desc d = descs[blockIdx.y];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < d.count; i += stride) {
    switch (d.mode) {
      case kCopyWords: static_cast<uint32_t*>(d.dst)[i] = static_cast<const uint32_t*>(d.src)[i]; break;
      case kCopyBytes: static_cast<uint8_t*>(d.dst)[i] = static_cast<const uint8_t*>(d.src)[i]; break;
      case kToBf16: static_cast<uint16_t*>(d.dst)[i] = float_to_bf16(static_cast<const float*>(d.src)[i]); break;
      case kFromBf16: static_cast<float*>(d.dst)[i] = bf16_to_float(static_cast<const uint16_t*>(d.src)[i]); break;
    }
  }
}

Desc describe(const PackLayout& l, size_t i, const void* src, void* dst, bool packing) {
  const bool bf16 = l.format == PackFormat::Bf16Lossy && l.items[i].is_float32;
  if (bf16) return {src, dst, l.items[i].numel, packing ? kToBf16 : kFromBf16};
  const int64_t bytes = l.stored_bytes[i];
  // Item offsets are 64-byte aligned; the other side is a tensor's data pointer.
  const bool words = bytes % 4 == 0 && reinterpret_cast<uintptr_t>(packing ? src : dst) % 4 == 0;
  return {src, dst, words ? bytes / 4 : bytes, words ? kCopyWords : kCopyBytes};
}

void launch(const std::vector<Desc>& descs, void* stream) {
  if (descs.empty()) return;
  Desc* device_descs = nullptr;
  const size_t bytes = descs.size() * sizeof(Desc);
  MEMOPT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&device_descs), bytes, as_stream(stream)));
  // From pageable memory: the copy is staged before this call returns, so `descs`
  // may die right after.
  MEMOPT_CUDA_CHECK(cudaMemcpyAsync(device_descs, descs.data(), bytes, cudaMemcpyHostToDevice, as_stream(stream)));
  int64_t largest = 1;
  for (const Desc& d : descs) largest = d.count > largest ? d.count : largest;
  const dim3 grid(grid_for(largest, kThreads) < 1024 ? grid_for(largest, kThreads) : 1024,
                  static_cast<unsigned>(descs.size()));
  pack_kernel<<<grid, kThreads, 0, as_stream(stream)>>>(device_descs);
  MEMOPT_CUDA_CHECK(cudaGetLastError());
  MEMOPT_CUDA_CHECK(cudaFreeAsync(device_descs, as_stream(stream)));
}

}  // namespace

void pack(const PackLayout& l, std::span<const void* const> srcs, std::byte* dst, void* stream) {
  if (srcs.size() != l.items.size()) throw std::invalid_argument("cuda::pack: pointer count differs from the layout");
  // Zero the padding (and everything) first, so the buffer is a function of its inputs.
  MEMOPT_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(l.total_bytes), as_stream(stream)));
  std::vector<Desc> descs;
  for (size_t i = 0; i < l.items.size(); ++i)
    if (l.stored_bytes[i] > 0) descs.push_back(describe(l, i, srcs[i], dst + l.offset_bytes[i], true));
  launch(descs, stream);
}

void unpack(const PackLayout& l, const std::byte* src, std::span<void* const> dsts, void* stream) {
  if (dsts.size() != l.items.size()) throw std::invalid_argument("cuda::unpack: pointer count differs from the layout");
  std::vector<Desc> descs;
  for (size_t i = 0; i < l.items.size(); ++i)
    if (l.stored_bytes[i] > 0) descs.push_back(describe(l, i, src + l.offset_bytes[i], dsts[i], false));
  launch(descs, stream);
}

}  // namespace memopt::kernels::cuda

// pack.h: a group of tensors packed into one contiguous buffer and back, so that an
// offload moves one buffer (one transfer, one pinned allocation) instead of one per
// tensor. Optionally float32 entries are stored as bfloat16: LOSSY, off by default.
// Raw pointers and byte counts; no LibTorch, no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kernels/philox.h"  // MEMOPT_HOST_DEVICE

namespace memopt::kernels {

enum class PackFormat {
  Exact,     // every byte as it is
  Bf16Lossy, // float32 entries rounded to bfloat16 (nearest, ties to even): halves them
};

struct PackFormatInfo { PackFormat value; const char* word; const char* meaning; };
inline constexpr PackFormatInfo kPackFormats[] = {
    {PackFormat::Exact, "exact", "bytes as they are"},
    {PackFormat::Bf16Lossy, "bf16-lossy", "float32 stored as bfloat16, relative error <= 2^-8"},
};
const char* pack_format_word(PackFormat f);

// One tensor of the group: its element count and whether it is float32 (only those
// are compressed; anything else is copied byte for byte).
struct PackItem {
  int64_t numel = 0;
  int64_t element_bytes = 4;
  bool is_float32 = true;
};

// Where each item lives in the buffer. Every item starts on a kPackAlignBytes
// boundary, so a device kernel or a memcpy reads it aligned.
inline constexpr int64_t kPackAlignBytes = 64;
struct PackLayout {
  PackFormat format = PackFormat::Exact;
  std::vector<PackItem> items;
  std::vector<int64_t> offset_bytes;  // per item
  std::vector<int64_t> stored_bytes;  // per item, in the buffer
  int64_t total_bytes = 0;
};
// Throws std::invalid_argument naming the item when a size is negative.
PackLayout pack_layout(std::span<const PackItem> items, PackFormat format = PackFormat::Exact);

// bfloat16 from float32, round to nearest, ties to even; NaN stays a (quiet) NaN.
// For normal results |bf16(x) - x| <= 2^-8 |x| (8 significant bits); below 2^-126
// the error is at most half a bfloat16 subnormal step, 2^-134.
MEMOPT_HOST_DEVICE inline uint16_t float_to_bf16(float x) {
  uint32_t u;
  static_assert(sizeof(u) == sizeof(x));
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
MEMOPT_HOST_DEVICE inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

namespace cpu {
// srcs[i] points at items[i]'s data; dst has layout.total_bytes. Padding is zeroed,
// so a packed buffer is a deterministic function of its inputs.
void pack(const PackLayout& layout, std::span<const void* const> srcs, std::byte* dst);
// The inverse: dsts[i] receives items[i] (bf16 entries widened back to float32).
void unpack(const PackLayout& layout, const std::byte* src, std::span<void* const> dsts);
}  // namespace cpu

namespace cuda {
// The same with srcs/dsts in device memory and the buffer in device or mapped pinned
// host memory: one kernel launch for the whole group (its small descriptor table is
// copied to the device on `stream` first). MEMOPT_CUDA builds only.
void pack(const PackLayout& layout, std::span<const void* const> srcs, std::byte* dst, void* stream);
void unpack(const PackLayout& layout, const std::byte* src, std::span<void* const> dsts, void* stream);
}  // namespace cuda

}  // namespace memopt::kernels

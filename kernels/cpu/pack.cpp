// cpu/pack.cpp: the layout of kernels/pack.h and its CPU pack/unpack (memcpy per
// exact item, a conversion loop per bf16 item).
#include "kernels/pack.h"

#include <cstring>
#include <stdexcept>

namespace memopt::kernels {

const char* pack_format_word(PackFormat f) {
  for (const auto& row : kPackFormats)
    if (row.value == f) return row.word;
  return "?";
}

PackLayout pack_layout(std::span<const PackItem> items, PackFormat format) {
  PackLayout l;
  l.format = format;
  l.items.assign(items.begin(), items.end());
  int64_t at = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const PackItem& it = items[i];
    if (it.numel < 0 || it.element_bytes <= 0 || (it.is_float32 && it.element_bytes != 4))
      throw std::invalid_argument("pack_layout: item " + std::to_string(i) + " has numel " +
                                  std::to_string(it.numel) + ", element_bytes " + std::to_string(it.element_bytes) +
                                  (it.is_float32 ? " (float32)" : "") +
                                  "; numel must be >= 0 and element_bytes positive (4 for float32)");
    const bool compress = format == PackFormat::Bf16Lossy && it.is_float32;
    const int64_t bytes = it.numel * (compress ? 2 : it.element_bytes);
    at = (at + kPackAlignBytes - 1) / kPackAlignBytes * kPackAlignBytes;
    l.offset_bytes.push_back(at);
    l.stored_bytes.push_back(bytes);
    at += bytes;
  }
  l.total_bytes = at;
  return l;
}

namespace cpu {
namespace {

bool compressed(const PackLayout& l, size_t i) { return l.format == PackFormat::Bf16Lossy && l.items[i].is_float32; }

void check_count(const PackLayout& l, size_t n, const char* what) {
  if (n != l.items.size())
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " pointers for a layout of " +
                                std::to_string(l.items.size()) + " items");
}

}  // namespace

void pack(const PackLayout& l, std::span<const void* const> srcs, std::byte* dst) {
  check_count(l, srcs.size(), "pack");
  int64_t at = 0;
  for (size_t i = 0; i < l.items.size(); ++i) {
    std::memset(dst + at, 0, static_cast<size_t>(l.offset_bytes[i] - at));  // alignment padding
    std::byte* out = dst + l.offset_bytes[i];
    if (compressed(l, i)) {
      const float* in = static_cast<const float*>(srcs[i]);
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t e = 0; e < l.items[i].numel; ++e) o[e] = float_to_bf16(in[e]);
    } else if (l.stored_bytes[i] > 0) {
      std::memcpy(out, srcs[i], static_cast<size_t>(l.stored_bytes[i]));
    }
    at = l.offset_bytes[i] + l.stored_bytes[i];
  }
}

void unpack(const PackLayout& l, const std::byte* src, std::span<void* const> dsts) {
  check_count(l, dsts.size(), "unpack");
  for (size_t i = 0; i < l.items.size(); ++i) {
    const std::byte* in = src + l.offset_bytes[i];
    if (compressed(l, i)) {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(in);
      float* o = static_cast<float*>(dsts[i]);
      for (int64_t e = 0; e < l.items[i].numel; ++e) o[e] = bf16_to_float(s[e]);
    } else if (l.stored_bytes[i] > 0) {
      std::memcpy(dsts[i], in, static_cast<size_t>(l.stored_bytes[i]));
    }
  }
}

}  // namespace cpu
}  // namespace memopt::kernels

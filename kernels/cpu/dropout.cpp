// cpu/dropout.cpp: the CPU dropout of kernels/dropout.h. The aligned middle of a call
// goes in chunks: the Philox words of 64 consecutive blocks (256 elements) into a
// buffer, then the elements -- two simple loops the compiler vectorizes (4 blocks per
// SSE register). A head and tail not on a block boundary take the per-element path of
// dropout_keep(). Same words, same mask as every other implementation (Note [Dropout
// counter mapping]).
#include "kernels/dropout.h"

#include <algorithm>

namespace memopt::kernels::cpu {
namespace {

constexpr int64_t kChunkBlocks = 64;

// Calls apply(e0, words, count): words[j] is element e0 + j's Philox word, j < count.
template <typename Apply>
void for_each_word_chunk(int64_t n, DropoutKey key, Apply&& apply) {
  uint32_t words[4 * kChunkBlocks];
  int64_t e = 0;
  for (; e < n && (key.offset + static_cast<uint64_t>(e)) % 4 != 0; ++e) {
    const uint64_t g = key.offset + static_cast<uint64_t>(e);
    words[0] = dropout_block(key, g / 4).v[g % 4];
    apply(e, words, 1);
  }
  while (e + 4 <= n) {
    const int64_t blocks = std::min<int64_t>(kChunkBlocks, (n - e) / 4);
    const uint64_t first = (key.offset + static_cast<uint64_t>(e)) / 4;
    for (int64_t j = 0; j < blocks; ++j) {
      const Philox4x32 r = dropout_block(key, first + static_cast<uint64_t>(j));
      words[4 * j] = r.v[0];
      words[4 * j + 1] = r.v[1];
      words[4 * j + 2] = r.v[2];
      words[4 * j + 3] = r.v[3];
    }
    apply(e, words, 4 * blocks);
    e += 4 * blocks;
  }
  if (e < n) {
    const Philox4x32 r = dropout_block(key, (key.offset + static_cast<uint64_t>(e)) / 4);
    for (int64_t j = 0; e + j < n; ++j) words[j] = r.v[j];
    apply(e, words, n - e);
  }
}

void scale_kept(const float* in, float* out, int64_t n, float p, DropoutKey key) {
  const uint32_t threshold = dropout_threshold(p);
  const float scale = dropout_scale(p);
  for_each_word_chunk(n, key, [&](int64_t e0, const uint32_t* words, int64_t count) {
    for (int64_t j = 0; j < count; ++j) out[e0 + j] = words[j] >= threshold ? in[e0 + j] * scale : 0.0f;
  });
}

}  // namespace

void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutKey key) { scale_kept(x, y, n, p, key); }

// The forward applied to the gradient: same key, same mask.
void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutKey key) {
  scale_kept(dy, dx, n, p, key);
}

void dropout_mask(uint8_t* mask, int64_t n, float p, DropoutKey key) {
  const uint32_t threshold = dropout_threshold(p);
  for_each_word_chunk(n, key, [&](int64_t e0, const uint32_t* words, int64_t count) {
    for (int64_t j = 0; j < count; ++j) mask[e0 + j] = words[j] >= threshold ? 1 : 0;
  });
}

}  // namespace memopt::kernels::cpu

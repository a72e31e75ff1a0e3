// cpu/dropout.cpp: the CPU dropout of kernels/dropout.h. One Philox call serves four
// consecutive elements (Note [Dropout counter mapping]); the head and tail of a call
// whose offset is not a multiple of 4 take the per-element path.
#include "kernels/dropout.h"

namespace memopt::kernels::cpu {
namespace {

// Calls f(e, keep) for every element e in [0, n), in order.
template <typename F>
void for_each_keep(int64_t n, float p, DropoutKey key, F&& f) {
  const uint32_t threshold = dropout_threshold(p);
  int64_t e = 0;
  while (e < n && (key.offset + static_cast<uint64_t>(e)) % 4 != 0) {
    f(e, dropout_keep(key, e, threshold));
    ++e;
  }
  for (; e + 4 <= n; e += 4) {
    const Philox4x32 r = dropout_block(key, (key.offset + static_cast<uint64_t>(e)) / 4);
    for (int j = 0; j < 4; ++j) f(e + j, r.v[j] >= threshold);
  }
  for (; e < n; ++e) f(e, dropout_keep(key, e, threshold));
}

}  // namespace

void dropout_forward(const float* x, float* y, int64_t n, float p, DropoutKey key) {
  const float scale = dropout_scale(p);
  for_each_keep(n, p, key, [&](int64_t e, bool keep) { y[e] = keep ? x[e] * scale : 0.0f; });
}

void dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutKey key) {
  const float scale = dropout_scale(p);
  for_each_keep(n, p, key, [&](int64_t e, bool keep) { dx[e] = keep ? dy[e] * scale : 0.0f; });
}

void dropout_mask(uint8_t* mask, int64_t n, float p, DropoutKey key) {
  for_each_keep(n, p, key, [&](int64_t e, bool keep) { mask[e] = keep ? 1 : 0; });
}

}  // namespace memopt::kernels::cpu

// philox.h: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011), the counter-based generator memopt's dropout draws from. A pure
// function of (counter, key): any element's random bits can be recomputed anywhere,
// in any order, on the CPU or a GPU, which is what lets dropout forget its mask.
// Header-only and usable from CUDA device code; includes no CUDA header.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MEMOPT_HOST_DEVICE __host__ __device__
#else
#define MEMOPT_HOST_DEVICE
#endif

namespace memopt::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

// The round multipliers and Weyl key increments of the paper (and Random123).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

MEMOPT_HOST_DEVICE inline Philox4x32 philox4x32_round(Philox4x32 c, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c.v[0];
  const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c.v[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
}

// Ten rounds; the key is bumped between rounds (nine bumps), as Random123's
// philox4x32_R(10, ...) does, so the published known-answer vectors apply.
MEMOPT_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      key0 += kPhiloxW0;
      key1 += kPhiloxW1;
    }
    counter = philox4x32_round(counter, key0, key1);
  }
  return counter;
}

}  // namespace memopt::kernels

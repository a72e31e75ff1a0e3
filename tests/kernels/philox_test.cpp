// philox_test.cpp: kernels/philox.h against the published Philox4x32-10 known-answer
// vectors (Random123's kat_vectors, lines "philox4x32 10 ...": counter, key, output)
// and against the independent reference in kernels/cpu/reference.h.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/reference.h"
#include "kernels/philox.h"

namespace memopt::kernels {
namespace {

struct Kat {
  uint32_t counter[4];
  uint32_t key[2];
  uint32_t expected[4];
};

// Random123 (DEShawResearch/random123) tests/kat_vectors.
const Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, KnownAnswerVectors) {
  for (const Kat& k : kKats) {
    const Philox4x32 got =
        philox4x32_10({{k.counter[0], k.counter[1], k.counter[2], k.counter[3]}}, k.key[0], k.key[1]);
    const Philox4x32 ref = reference::philox4x32_10(k.counter, k.key);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(got.v[j], k.expected[j]) << "word " << j;
      EXPECT_EQ(ref.v[j], k.expected[j]) << "reference word " << j;
    }
  }
}

TEST(Philox, MatchesReferenceOnRandomInputs) {
  std::mt19937 rng(42);
  auto draw = [&] { return static_cast<uint32_t>(rng()); };
  for (int i = 0; i < 1000; ++i) {
    const uint32_t c[4] = {draw(), draw(), draw(), draw()}, k[2] = {draw(), draw()};
    const Philox4x32 got = philox4x32_10({{c[0], c[1], c[2], c[3]}}, k[0], k[1]);
    const Philox4x32 ref = reference::philox4x32_10(c, k);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(got.v[j], ref.v[j]);
  }
}

}  // namespace
}  // namespace memopt::kernels

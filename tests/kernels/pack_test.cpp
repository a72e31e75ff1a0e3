// pack_test.cpp: kernels/pack.h -- layouts, exact round trips of mixed groups, and the
// lossy bf16 format against the enumerating reference and its error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/pack.h"

namespace memopt::kernels {
namespace {

struct Group {
  std::vector<float> a, b;
  std::vector<int64_t> ids;
  std::vector<uint8_t> flags;
  std::vector<PackItem> items() const {
    return {{static_cast<int64_t>(a.size()), 4, true},
            {static_cast<int64_t>(ids.size()), 8, false},
            {0, 4, true},
            {static_cast<int64_t>(flags.size()), 1, false},
            {static_cast<int64_t>(b.size()), 4, true}};
  }
  std::vector<const void*> srcs() const { return {a.data(), ids.data(), nullptr, flags.data(), b.data()}; }
};

Group make_group(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  Group g;
  for (int i = 0; i < 1001; ++i) g.a.push_back(normal(rng));
  for (int i = 0; i < 37; ++i) g.b.push_back(normal(rng) * 1e-30f);  // tiny, still normal
  for (int i = 0; i < 13; ++i) g.ids.push_back(static_cast<int64_t>(rng()) << 20);
  for (int i = 0; i < 5; ++i) g.flags.push_back(static_cast<uint8_t>(rng() & 1));
  return g;
}

TEST(Pack, LayoutAlignsEveryItemAndCountsBytes) {
  const Group g = make_group(1);
  const auto items = g.items();
  for (PackFormat f : {PackFormat::Exact, PackFormat::Bf16Lossy}) {
    const PackLayout l = pack_layout(items, f);
    ASSERT_EQ(l.offset_bytes.size(), items.size());
    int64_t end = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(l.offset_bytes[i] % kPackAlignBytes, 0);
      EXPECT_GE(l.offset_bytes[i], end);
      EXPECT_LT(l.offset_bytes[i] - end, kPackAlignBytes);
      const int64_t elem = (f == PackFormat::Bf16Lossy && items[i].is_float32) ? 2 : items[i].element_bytes;
      EXPECT_EQ(l.stored_bytes[i], items[i].numel * elem);
      end = l.offset_bytes[i] + l.stored_bytes[i];
    }
    EXPECT_EQ(l.total_bytes, end);
  }
  EXPECT_THROW(pack_layout(std::vector<PackItem>{{-1, 4, true}}), std::invalid_argument);
}

TEST(Pack, ExactRoundTripIsBitIdentical) {
  const Group g = make_group(2);
  const PackLayout l = pack_layout(g.items());
  std::vector<std::byte> buf(static_cast<size_t>(l.total_bytes), std::byte{0xAB});
  cpu::pack(l, g.srcs(), buf.data());
  Group out;
  out.a.resize(g.a.size());
  out.b.resize(g.b.size());
  out.ids.resize(g.ids.size());
  out.flags.resize(g.flags.size());
  const std::vector<void*> dsts = {out.a.data(), out.ids.data(), nullptr, out.flags.data(), out.b.data()};
  cpu::unpack(l, buf.data(), dsts);
  EXPECT_EQ(std::memcmp(out.a.data(), g.a.data(), g.a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(out.b.data(), g.b.data(), g.b.size() * 4), 0);
  EXPECT_EQ(out.ids, g.ids);
  EXPECT_EQ(out.flags, g.flags);
  // Padding is zeroed: packing the same group twice gives the same bytes.
  std::vector<std::byte> again(buf.size(), std::byte{0x11});
  cpu::pack(l, g.srcs(), again.data());
  EXPECT_EQ(buf, again);
}

TEST(Pack, Bf16RoundTripIsNearestEvenWithinBound) {
  const Group g = make_group(3);
  const PackLayout l = pack_layout(g.items(), PackFormat::Bf16Lossy);
  EXPECT_LT(l.total_bytes, pack_layout(g.items()).total_bytes);
  std::vector<std::byte> buf(static_cast<size_t>(l.total_bytes));
  cpu::pack(l, g.srcs(), buf.data());
  Group out;
  out.a.resize(g.a.size());
  out.b.resize(g.b.size());
  out.ids.resize(g.ids.size());
  out.flags.resize(g.flags.size());
  const std::vector<void*> dsts = {out.a.data(), out.ids.data(), nullptr, out.flags.data(), out.b.data()};
  cpu::unpack(l, buf.data(), dsts);
  for (const auto* pair : {&g.a, &g.b}) {
    const std::vector<float>& in = *pair;
    const std::vector<float>& got = pair == &g.a ? out.a : out.b;
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(got[i], reference::round_to_bf16(in[i])) << "element " << i << " of " << in[i];
      // Round to nearest with 8 significant bits: relative error <= 2^-8 for normals.
      ASSERT_LE(std::abs(static_cast<double>(got[i]) - in[i]), std::ldexp(std::abs(in[i]), -8));
    }
  }
  EXPECT_EQ(out.ids, g.ids);  // non-float items stay exact
  EXPECT_EQ(out.flags, g.flags);
}

TEST(Pack, Bf16TiesGoToEvenAndSpecialsSurvive) {
  // 1 + 2^-8 lies halfway between bfloat16 1 (even mantissa) and 1 + 2^-7 (odd).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(bf16_to_float(float_to_bf16(-0.0f))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low 16 bits must not turn into infinity.
  uint32_t bits = 0x7F800001u;
  float snan;
  std::memcpy(&snan, &bits, sizeof snan);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(snan))));
  // Every float in a sweep of exponents against the reference.
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    uint32_t u = rng() & 0xFEFFFFFFu;  // keep the exponent below 0xFE: finite, below the bf16 max
    float x;
    std::memcpy(&x, &u, sizeof x);
    ASSERT_EQ(bf16_to_float(float_to_bf16(x)), reference::round_to_bf16(x)) << std::hexfloat << x;
  }
}

}  // namespace
}  // namespace memopt::kernels

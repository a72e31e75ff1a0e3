// link_check_test.cpp: `memopt link`'s measurement (runtime/link_check.h) on the CPU
// engine's emulated link. The emulated link never beats its cap (Note in
// copy_engine_test.cpp's capped-rate test), so every achieved rate, alone, both at
// once or beside compute, is at most the cap; a full-duplex link runs both directions
// at once, so the two at once are each far above half the cap.
#include <gtest/gtest.h>

#include "runtime/link_check.h"

namespace memopt::runtime {
namespace {

TEST(LinkCheck, EveryRateIsAtMostTheEmulatedCapAndBothDirectionsRunAtOnce) {
  LinkCheckOptions o;
  o.d2h_cap_bytes_per_s = 50e6;
  o.h2d_cap_bytes_per_s = 100e6;
  o.num_bytes = 1 << 20;  // 20 ms out, 10 ms back
  o.repeat = 3;
  o.matmul_size = 64;
  o.num_matmuls = 2;
  const LinkCheck c = check_link(o);
  for (const common::Spread* s : {&c.d2h_alone, &c.d2h_duplex, &c.d2h_under_compute}) {
    EXPECT_LE(s->q75, o.d2h_cap_bytes_per_s);
    EXPECT_GT(s->median, 0.5 * o.d2h_cap_bytes_per_s);
  }
  for (const common::Spread* s : {&c.h2d_alone, &c.h2d_duplex, &c.h2d_under_compute}) {
    EXPECT_LE(s->q75, o.h2d_cap_bytes_per_s);
    EXPECT_GT(s->median, 0.5 * o.h2d_cap_bytes_per_s);
  }
  EXPECT_GT(c.compute_alone_ms.median, 0.0);
  EXPECT_GT(c.compute_beside_copies_ms.median, 0.0);
  const nlohmann::ordered_json j = link_check_json(o, c);
  EXPECT_EQ(j.at("device"), "cpu");
  EXPECT_EQ(j.at("h2d_duplex_bytes_per_s").at("median").get<double>(), c.h2d_duplex.median);
}

TEST(LinkCheck, RefusesNonsenseCounts) {
  LinkCheckOptions o;
  o.repeat = 0;
  EXPECT_THROW(check_link(o), std::invalid_argument);
  o.repeat = 1;
  o.num_bytes = 0;
  EXPECT_THROW(check_link(o), std::invalid_argument);
}

}  // namespace
}  // namespace memopt::runtime

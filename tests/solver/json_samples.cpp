// json_samples.cpp: the samples of json_samples.h.
#include "tests/solver/json_samples.h"

#include <string>

#include <gtest/gtest.h>

namespace memopt::solver::testing {

Profile sample_profile(bool with_link) {
  Profile p;
  p.model = {{"name", "toy"}, {"n_layer", 1}, {"dtype", "float32"}};
  p.device = {{"kind", "cpu"}, {"name", "test cpu"}, {"threads", 1}};
  p.measured = false;
  p.static_bytes = 123456789;
  Chain& c = p.chain;
  c.input_bytes = 4096;
  c.stages = {
      {"embed", 0.1, 1.0 / 3.0, 1000, 1500, 10, 20},
      {"block.0", 2.5e-7, 12.75, 2000, 2000, 0, 30},
      {"head+loss", 7.0, 1e-300, 4, 8004, 50000, 60000},
  };
  c.loss = {0.125, 7};
  if (with_link) c.link = Link{1.2e10, 1.1e10};
  return p;
}

Schedule sample_schedule() {
  Schedule s;
  s.solver = "optimal";
  s.budget_bytes = 4000000000;
  s.chain_length = 3;
  s.predicted = {3990000000, 812.5};
  s.ops = {{OpKind::FwdCkpt, 0}, {OpKind::Offload, 0},  {OpKind::FwdDrop, 1}, {OpKind::FwdKeep, 2},
           {OpKind::Loss, -1},   {OpKind::Bwd, 2},      {OpKind::Prefetch, 0}, {OpKind::FwdKeep, 0},
           {OpKind::FwdKeep, 1}, {OpKind::Bwd, 1},      {OpKind::Bwd, 0},
           // IO only: the table's words, not a runnable order.
           {OpKind::WaitOffloads, -1}, {OpKind::OffloadSaved, 3}, {OpKind::PrefetchSaved, 3},
           {OpKind::OffloadInput, 2}, {OpKind::PrefetchInput, 2}, {OpKind::OffloadCarried, 2}, {OpKind::PrefetchCarried, 2}};
  return s;
}

void ExpectSameProfile(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.measured, b.measured);
  EXPECT_EQ(a.static_bytes, b.static_bytes);
  EXPECT_EQ(a.chain.input_bytes, b.chain.input_bytes);
  ASSERT_EQ(a.chain.length(), b.chain.length());
  for (int i = 0; i < a.chain.length(); ++i) {
    SCOPED_TRACE("stage " + std::to_string(i));
    const Stage& s = a.chain.stages[i];
    const Stage& t = b.chain.stages[i];
    EXPECT_EQ(s.name, t.name);
    EXPECT_EQ(s.fwd_ms, t.fwd_ms);
    EXPECT_EQ(s.bwd_ms, t.bwd_ms);
    EXPECT_EQ(s.out_bytes, t.out_bytes);
    EXPECT_EQ(s.saved_bytes, t.saved_bytes);
    EXPECT_EQ(s.fwd_tmp_bytes, t.fwd_tmp_bytes);
    EXPECT_EQ(s.bwd_tmp_bytes, t.bwd_tmp_bytes);
  }
  EXPECT_EQ(a.chain.loss.bwd_ms, b.chain.loss.bwd_ms);
  EXPECT_EQ(a.chain.loss.bwd_tmp_bytes, b.chain.loss.bwd_tmp_bytes);
  ASSERT_EQ(a.chain.link.has_value(), b.chain.link.has_value());
  if (a.chain.link) {
    EXPECT_EQ(a.chain.link->d2h_bytes_per_s, b.chain.link->d2h_bytes_per_s);
    EXPECT_EQ(a.chain.link->h2d_bytes_per_s, b.chain.link->h2d_bytes_per_s);
  }
}

}  // namespace memopt::solver::testing

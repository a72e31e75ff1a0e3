// synthetic_profile.h: the small profile the report tests sweep and compare solvers on.
#pragma once

#include <string>

#include "solver/io/profile_json.h"

namespace memopt::report {

// Six stages of uneven sizes and times, and a link, so that every solver (offload
// included) has something to trade.
inline solver::Profile synthetic_profile() {
  solver::Profile p;
  p.chain.input_bytes = 1000;
  const int64_t out[] = {4000, 4000, 6000, 4000, 5000, 8};
  const int64_t saved[] = {9000, 15000, 20000, 12000, 16000, 30000};
  const double fwd[] = {1.0, 3.0, 4.0, 2.5, 3.5, 2.0};
  for (int i = 0; i < 6; ++i) {
    solver::Stage s;
    s.name = "s";
    s.name += std::to_string(i);  // not "s" + ...: GCC 12 warns falsely (-Wrestrict) on that
    s.fwd_ms = fwd[i];
    s.bwd_ms = 2 * fwd[i];
    s.out_bytes = out[i];
    s.saved_bytes = saved[i];
    s.fwd_tmp_bytes = 500 * (i + 1);
    s.bwd_tmp_bytes = 700 * (i + 1);
    p.chain.stages.push_back(s);
  }
  p.chain.link = solver::Link{4e6, 4e6};  // 4 bytes/us: copies comparable to compute
  p.model = {{"name", "synthetic"}};
  p.device = {{"name", "test"}};
  return p;
}

}  // namespace memopt::report

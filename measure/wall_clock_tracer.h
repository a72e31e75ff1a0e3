// wall_clock_tracer.h: a stage tracer that times each range on the host's steady
// clock. On the CPU testbed an op's work is done when its range ends, so this is the
// op's time; on a GPU the host only launches, and the device's time comes from the
// CUPTI tracer (measure/cuda/) instead.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "measure/stage_tracer.h"

namespace memopt::measure {

class WallClockTracer final : public StageTracer {
 public:
  struct Timed {
    std::string label;  // range_label(op, stage)
    double ms = 0;
  };
  std::vector<Timed> timed;  // every range closed while `recording`, in order
  bool recording = false;

 protected:
  void on_begin(uint64_t, const std::string& label) override {
    label_ = label;
    start_ = std::chrono::steady_clock::now();
  }
  void on_end(uint64_t) override {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    if (recording) timed.push_back({label_, ms});
  }

 private:
  std::string label_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace memopt::measure

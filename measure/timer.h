// timer.h: the clock of every measurement. A CUDA timer would record events on the compute
// stream and synchronize in stop_ms(); on the CPU the work is done when the call
// returns, so a steady clock is exact enough.
#pragma once

#include <chrono>

namespace memopt::measure {

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;  // milliseconds since start(), once the work has finished
};

class CpuTimer final : public Timer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  double stop_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace memopt::measure

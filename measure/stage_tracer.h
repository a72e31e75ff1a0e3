// stage_tracer.h: brackets each stage's work with a named range so that the device
// activity it launched can be attributed to it (measure/trace.h). The bookkeeping
// (range ids, labels, nesting checks, attribution) is here, device-neutral; a device
// backend only overrides the three hooks: CUPTI external correlation ids + NVTX in
// measure/cuda/cupti_tracer.h. On the CPU nothing runs on a device, so the base
// class alone is the CPU tracer: its report has the ranges and no activity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/trace.h"

namespace memopt::measure {

class StageTracer {
 public:
  virtual ~StageTracer() = default;
  // Opens the range memopt/<op>/<stage>. Ranges do not nest: one stage op at a time.
  void begin(const std::string& op, const std::string& stage);
  void end();
  // Flushes the device's records and attributes them to the ranges opened since the
  // last collect(); throws std::logic_error while a range is open.
  TraceReport collect();
  size_t num_pending_ranges() const { return ranges_.size(); }

 protected:
  virtual void on_begin(uint64_t external_id, const std::string& label) {}
  virtual void on_end(uint64_t external_id) {}
  // Appends every record and link the device completed since the last call.
  virtual void drain(std::vector<ActivityRecord>& records, std::vector<CorrelationLink>& links) {}
  // Records lost so far (TraceReport::num_lost_records).
  virtual int64_t num_lost_records() { return 0; }

 private:
  std::vector<TraceRange> ranges_;
  uint64_t next_external_id_ = 1;
  bool open_ = false;
};

// begin() in the constructor, end() in the destructor.
class StageRange {
 public:
  StageRange(StageTracer* tracer, const std::string& op, const std::string& stage) : tracer_(tracer) {
    if (tracer_) tracer_->begin(op, stage);
  }
  ~StageRange() {
    if (tracer_) tracer_->end();
  }
  StageRange(const StageRange&) = delete;
  StageRange& operator=(const StageRange&) = delete;

 private:
  StageTracer* tracer_;
};

}  // namespace memopt::measure

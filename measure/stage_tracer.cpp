// stage_tracer.cpp: the device-neutral half of a stage tracer.
#include "measure/stage_tracer.h"

#include <stdexcept>

namespace memopt::measure {

void StageTracer::begin(const std::string& op, const std::string& stage) {
  if (open_)
    throw std::logic_error("stage tracer: range " + range_label(op, stage) + " opened inside " +
                           range_label(ranges_.back().op, ranges_.back().stage) + "; ranges do not nest");
  const uint64_t id = next_external_id_++;
  ranges_.push_back({id, op, stage});
  open_ = true;
  on_begin(id, range_label(op, stage));
}

void StageTracer::end() {
  if (!open_) throw std::logic_error("stage tracer: end() without begin()");
  open_ = false;
  on_end(ranges_.back().external_id);
}

TraceReport StageTracer::collect() {
  if (open_) throw std::logic_error("stage tracer: collect() while " + range_label(ranges_.back().op, ranges_.back().stage) + " is open");
  std::vector<ActivityRecord> records;
  std::vector<CorrelationLink> links;
  drain(records, links);
  TraceReport report = attribute(records, links, ranges_);
  report.num_lost_records = num_lost_records();
  ranges_.clear();
  return report;
}

}  // namespace memopt::measure

// trace.cpp: attribution of device activity records to stage ranges.
#include "measure/trace.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "common/stats.h"

namespace memopt::measure {
namespace {

double ns_to_ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// One range instance's records, before labels are summed.
struct Instance {
  std::vector<Interval> kernels;
  std::vector<Interval> copies;
  double kernel_sum_ms = 0;
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  int num_copies = 0;

  void add(const ActivityRecord& r) {
    const Interval iv{r.start_ns, r.end_ns};
    if (r.kind == ActivityKind::Kernel) {
      kernels.push_back(iv);
      kernel_sum_ms += ns_to_ms(r.end_ns - r.start_ns);
      return;
    }
    copies.push_back(iv);
    ++num_copies;
    if (r.kind == ActivityKind::MemcpyH2D) h2d_bytes += r.num_bytes;
    if (r.kind == ActivityKind::MemcpyD2H) d2h_bytes += r.num_bytes;
  }
};

void fold(RangeReport& out, const Instance& in, std::vector<double>* busy_per_instance) {
  const double busy = ns_to_ms(union_length(in.kernels));
  out.num_kernels += static_cast<int>(in.kernels.size());
  out.num_copies += in.num_copies;
  out.kernel_busy_ms += busy;
  out.kernel_sum_ms += in.kernel_sum_ms;
  out.copy_busy_ms += ns_to_ms(union_length(in.copies));
  out.h2d_bytes += in.h2d_bytes;
  out.d2h_bytes += in.d2h_bytes;
  if (busy_per_instance) busy_per_instance->push_back(busy);
}

}  // namespace

const char* activity_kind_name(ActivityKind kind) {
  switch (kind) {
#define MEMOPT_CASE(e, word) \
  case ActivityKind::e:      \
    return word;
    MEMOPT_ACTIVITY_KINDS(MEMOPT_CASE)
#undef MEMOPT_CASE
  }
  return "?";
}

bool is_copy(ActivityKind kind) {
  return kind == ActivityKind::MemcpyH2D || kind == ActivityKind::MemcpyD2H || kind == ActivityKind::MemcpyD2D ||
         kind == ActivityKind::MemcpyOther;
}

std::string range_label(const std::string& op, const std::string& stage) {
  std::string label = "memopt/" + op;
  if (stage.empty()) return label;  // an op of no stage (a wait)
  label += '/';
  label += stage;
  return label;
}

std::vector<Interval> merge_intervals(std::vector<Interval> intervals) {
  intervals.erase(std::remove_if(intervals.begin(), intervals.end(), [](const Interval& i) { return i.end <= i.start; }),
                  intervals.end());
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.start <= out.back().end) out.back().end = std::max(out.back().end, i.end);
    else out.push_back(i);
  }
  return out;
}

uint64_t union_length(std::vector<Interval> intervals) {
  uint64_t total = 0;
  for (const Interval& i : merge_intervals(std::move(intervals))) total += i.end - i.start;
  return total;
}

uint64_t overlap_length(std::vector<Interval> a, std::vector<Interval> b) {
  const std::vector<Interval> x = merge_intervals(std::move(a)), y = merge_intervals(std::move(b));
  uint64_t total = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const uint64_t start = std::max(x[i].start, y[j].start), end = std::min(x[i].end, y[j].end);
    if (start < end) total += end - start;
    if (x[i].end < y[j].end) ++i;
    else ++j;
  }
  return total;
}

TraceReport attribute(const std::vector<ActivityRecord>& records, const std::vector<CorrelationLink>& links,
                      const std::vector<TraceRange>& ranges) {
  std::unordered_map<uint64_t, size_t> range_of_external;  // external id -> index in ranges
  for (size_t k = 0; k < ranges.size(); ++k)
    if (!range_of_external.emplace(ranges[k].external_id, k).second)
      throw std::invalid_argument("trace: two ranges share the external correlation id " +
                                  std::to_string(ranges[k].external_id));
  std::unordered_map<uint32_t, uint64_t> external_of_call;
  for (const CorrelationLink& l : links) external_of_call.emplace(l.correlation_id, l.external_id);

  TraceReport report;
  std::vector<Instance> instances(ranges.size());
  Instance unattributed;
  std::vector<Interval> everything, all_kernels, all_copies;
  for (const ActivityRecord& r : records) {
    if (r.end_ns < r.start_ns) {
      ++report.num_malformed;
      continue;
    }
    everything.push_back({r.start_ns, r.end_ns});
    if (r.kind == ActivityKind::Kernel) all_kernels.push_back({r.start_ns, r.end_ns});
    if (is_copy(r.kind)) all_copies.push_back({r.start_ns, r.end_ns});
    const auto call = external_of_call.find(r.correlation_id);
    const auto range = call == external_of_call.end() ? range_of_external.end() : range_of_external.find(call->second);
    if (range == range_of_external.end()) unattributed.add(r);
    else instances[range->second].add(r);
  }
  report.device_busy_ms = ns_to_ms(union_length(std::move(everything)));
  report.copy_busy_ms = ns_to_ms(union_length(all_copies));
  report.copy_under_kernels_ms = ns_to_ms(overlap_length(std::move(all_copies), std::move(all_kernels)));

  // Sum instances per label, labels in order of first appearance.
  std::map<std::string, size_t> index_of_label;
  std::vector<std::vector<double>> busy_per_instance;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const std::string label = range_label(ranges[k].op, ranges[k].stage);
    auto [it, fresh] = index_of_label.emplace(label, report.ranges.size());
    if (fresh) {
      RangeReport r;
      r.label = label;
      r.op = ranges[k].op;
      r.stage = ranges[k].stage;
      report.ranges.push_back(r);
      busy_per_instance.emplace_back();
    }
    RangeReport& out = report.ranges[it->second];
    ++out.num_instances;
    fold(out, instances[k], &busy_per_instance[it->second]);
  }
  for (size_t k = 0; k < report.ranges.size(); ++k)
    report.ranges[k].median_kernel_busy_ms = common::median(busy_per_instance[k]);
  fold(report.unattributed, unattributed, nullptr);
  report.unattributed.median_kernel_busy_ms = report.unattributed.kernel_busy_ms;
  return report;
}

nlohmann::json trace_report_json(const TraceReport& report) {
  const auto one = [](const RangeReport& r) {
    return nlohmann::json{{"label", r.label},
                          {"op", r.op},
                          {"stage", r.stage},
                          {"num_instances", r.num_instances},
                          {"num_kernels", r.num_kernels},
                          {"num_copies", r.num_copies},
                          {"kernel_busy_ms", r.kernel_busy_ms},
                          {"kernel_sum_ms", r.kernel_sum_ms},
                          {"median_kernel_busy_ms", r.median_kernel_busy_ms},
                          {"copy_busy_ms", r.copy_busy_ms},
                          {"h2d_bytes", r.h2d_bytes},
                          {"d2h_bytes", r.d2h_bytes}};
  };
  nlohmann::json ranges = nlohmann::json::array();
  for (const RangeReport& r : report.ranges) ranges.push_back(one(r));
  return {{"ranges", ranges},
          {"unattributed", one(report.unattributed)},
          {"device_busy_ms", report.device_busy_ms},
          {"copy_busy_ms", report.copy_busy_ms},
          {"copy_under_kernels_ms", report.copy_under_kernels_ms},
          {"num_malformed", report.num_malformed},
          {"num_lost_records", report.num_lost_records}};
}

std::string format_trace_report(const TraceReport& report) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-40s %5s %8s %12s %12s %10s\n", "range", "runs", "kernels", "median ms",
                "busy ms", "copy ms");
  out += line;
  const auto row = [&](const RangeReport& r, const std::string& label) {
    std::snprintf(line, sizeof line, "%-40s %5d %8d %12.3f %12.3f %10.3f\n", label.c_str(), r.num_instances,
                  r.num_kernels, r.median_kernel_busy_ms, r.kernel_busy_ms, r.copy_busy_ms);
    out += line;
  };
  for (const RangeReport& r : report.ranges) row(r, r.label);
  row(report.unattributed, "(outside every range)");
  std::snprintf(line, sizeof line, "device busy %.3f ms; %d incomplete records ignored\n", report.device_busy_ms,
                report.num_malformed);
  out += line;
  if (report.copy_busy_ms > 0) {
    std::snprintf(line, sizeof line, "copies %.3f ms, of which %.3f ms (%.0f%%) under kernels\n", report.copy_busy_ms,
                  report.copy_under_kernels_ms, 100.0 * report.copy_under_kernels_ms / report.copy_busy_ms);
    out += line;
  }
  if (report.num_lost_records > 0) {
    std::snprintf(line, sizeof line, "WARNING: the tracer lost %lld records; the times above miss that work\n",
                  static_cast<long long>(report.num_lost_records));
    out += line;
  }
  return out;
}

}  // namespace memopt::measure

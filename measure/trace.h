// trace.h: device activity records (kernels, copies) and how they become time per
// stage. A device tracer (CUPTI in measure/cuda/) only fills these plain structs;
// everything that reasons about them -- which stage a kernel belongs to, how much
// time overlapping kernels really took, the per-stage report -- is here, device-
// neutral and unit-tested on the CPU with synthetic record streams.
// Plain C++ + nlohmann/json: no LibTorch, no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memopt::measure {

// One table, the enum and its printed word (each enumeration is defined once).
#define MEMOPT_ACTIVITY_KINDS(_) \
  _(Kernel, "kernel")            \
  _(MemcpyH2D, "memcpy_h2d")     \
  _(MemcpyD2H, "memcpy_d2h")     \
  _(MemcpyD2D, "memcpy_d2d")     \
  _(MemcpyOther, "memcpy_other") \
  _(Memset, "memset")

enum class ActivityKind {
#define MEMOPT_ENUM(e, word) e,
  MEMOPT_ACTIVITY_KINDS(MEMOPT_ENUM)
#undef MEMOPT_ENUM
};
const char* activity_kind_name(ActivityKind kind);
bool is_copy(ActivityKind kind);  // a memcpy of any direction (not a memset)

// One piece of device work, as CUPTI's kernel and memcpy activity records give it.
struct ActivityRecord {
  ActivityKind kind = ActivityKind::Kernel;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;  // the host API call that launched it
  uint32_t stream_id = 0;
  int64_t num_bytes = 0;        // copies and memsets
  std::string name;             // kernels
};

// CUPTI's external correlation record: the host API call `correlation_id` was made
// while the range `external_id` was on top of the external correlation stack.
struct CorrelationLink {
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
};

// A range the host pushed around one stage's work: one instance per push.
struct TraceRange {
  uint64_t external_id = 0;
  std::string op;     // e.g. fwd_keep, bwd, fwd_nograd
  std::string stage;  // the stage's name
};

// "memopt/<op>/<stage>" ("memopt/<op>" for an op of no stage): what NVTX shows in
// Nsight Systems and the report's key.
std::string range_label(const std::string& op, const std::string& stage);

struct Interval {
  uint64_t start = 0;
  uint64_t end = 0;  // exclusive; end <= start is empty
};
// The union of the intervals as sorted, disjoint, non-empty intervals: overlapping
// and touching ones merged. Kernels on two streams overlap; their stage took the
// union, not the sum.
std::vector<Interval> merge_intervals(std::vector<Interval> intervals);
uint64_t union_length(std::vector<Interval> intervals);
// How long both sets are busy at once: the length of the intersection of their
// unions. Copies under kernels are copies the compute did not wait for.
uint64_t overlap_length(std::vector<Interval> a, std::vector<Interval> b);

// What one label's device work took, over every instance of its range.
struct RangeReport {
  std::string label;
  std::string op;
  std::string stage;
  int num_instances = 0;
  int num_kernels = 0;
  int num_copies = 0;         // memcpys and memsets
  double kernel_busy_ms = 0;  // sum over instances of the union of their kernels
  double kernel_sum_ms = 0;   // sum of kernel durations: > busy when kernels overlap
  double copy_busy_ms = 0;    // sum over instances of the union of their copies
  double median_kernel_busy_ms = 0;  // per instance: the figure a profile wants
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
};

struct TraceReport {
  std::vector<RangeReport> ranges;  // one per label, in the order labels first appeared
  RangeReport unattributed;         // records no range claims (label "")
  double device_busy_ms = 0;        // union of every kernel and copy, attributed or not
  // Every copy, attributed or not: how long the links were busy, and how much of that
  // some kernel ran meanwhile -- copies hidden under compute when the kernels are the
  // step's (a trace of one training step).
  double copy_busy_ms = 0;
  double copy_under_kernels_ms = 0;
  int num_malformed = 0;            // records with end < start (incomplete), ignored
  // Records the device tracer lost (CUPTI: no buffer space, or a range it could not
  // push on some thread): the figures above then miss work. Set by StageTracer.
  int64_t num_lost_records = 0;
};

// Attributes each record to the range its launching call ran under (through
// `links`), merges overlapping records per range instance, and sums per label.
// A correlation id linked twice keeps its first link; a link to an unknown range
// leaves its records unattributed. Throws std::invalid_argument on two ranges with
// one external id.
TraceReport attribute(const std::vector<ActivityRecord>& records, const std::vector<CorrelationLink>& links,
                      const std::vector<TraceRange>& ranges);

nlohmann::json trace_report_json(const TraceReport& report);
// A fixed-width table, one label a line, for the CLI.
std::string format_trace_report(const TraceReport& report);

}  // namespace memopt::measure

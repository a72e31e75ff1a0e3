// trace_test.cpp: the device-neutral record processing behind the CUDA tracer, on
// synthetic record streams. References: a brute-force discretised timeline (one
// bool per nanosecond) for interval unions, and a per-record linear scan for
// attribution; hand-computed cases for the edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "measure/stage_tracer.h"
#include "measure/trace.h"

namespace memopt::measure {
namespace {

constexpr uint64_t kHorizon = 300;  // ns: small enough for one bool per ns

uint64_t brute_union(const std::vector<Interval>& v) {
  std::vector<bool> busy(kHorizon, false);
  for (const Interval& i : v)
    for (uint64_t t = i.start; t < i.end; ++t) busy[t] = true;
  uint64_t n = 0;
  for (bool b : busy) n += b;
  return n;
}

std::vector<Interval> random_intervals(std::mt19937& rng, int n) {
  std::uniform_int_distribution<uint64_t> start(0, kHorizon - 1), len(0, 40);
  std::vector<Interval> v;
  for (int k = 0; k < n; ++k) {
    const uint64_t s = start(rng);
    v.push_back({s, std::min(kHorizon, s + len(rng))});
  }
  return v;
}

TEST(IntervalUnion, HandComputed) {
  EXPECT_EQ(union_length({}), 0u);
  EXPECT_EQ(union_length({{5, 5}}), 0u);                    // empty
  EXPECT_EQ(union_length({{9, 3}}), 0u);                    // end before start: empty
  EXPECT_EQ(union_length({{0, 10}, {5, 15}}), 15u);         // overlap
  EXPECT_EQ(union_length({{0, 10}, {10, 20}}), 20u);        // touching
  EXPECT_EQ(union_length({{0, 100}, {10, 20}, {30, 40}}), 100u);  // nested
  EXPECT_EQ(union_length({{50, 60}, {0, 10}}), 20u);        // unsorted, disjoint
  const std::vector<Interval> m = merge_intervals({{30, 40}, {0, 10}, {5, 12}, {12, 13}, {39, 45}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].start, 0u);
  EXPECT_EQ(m[0].end, 13u);
  EXPECT_EQ(m[1].start, 30u);
  EXPECT_EQ(m[1].end, 45u);
}

TEST(IntervalUnion, EqualsDiscretisedTimelineOnRandomSets) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::vector<Interval> v = random_intervals(rng, 1 + trial % 12);
    ASSERT_EQ(union_length(v), brute_union(v)) << "trial " << trial;
    const std::vector<Interval> m = merge_intervals(v);
    for (size_t k = 0; k < m.size(); ++k) {
      ASSERT_LT(m[k].start, m[k].end);
      if (k) {
        ASSERT_LT(m[k - 1].end, m[k].start);  // disjoint and not touching
      }
    }
  }
}

TEST(IntervalOverlap, HandComputed) {
  // Copies [0,10) and [30,40); kernels [5,12), [12,35) on two streams: under kernels
  // are [5,10) and [30,35).
  EXPECT_EQ(overlap_length({{0, 10}, {30, 40}}, {{5, 12}, {12, 35}}), 10u);
  EXPECT_EQ(overlap_length({{0, 10}}, {}), 0u);
  EXPECT_EQ(overlap_length({{0, 10}}, {{10, 20}}), 0u);  // touching is not overlapping
  EXPECT_EQ(overlap_length({{0, 10}, {2, 8}}, {{0, 10}}), 10u);  // each set counted as its union
}

// Against a timeline with one bool per ns and set.
TEST(IntervalOverlap, EqualsDiscretisedTimelineOnRandomSets) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    const std::vector<Interval> a = random_intervals(rng, trial % 9), b = random_intervals(rng, 1 + trial % 7);
    std::vector<bool> in_a(kHorizon, false), in_b(kHorizon, false);
    for (const Interval& i : a)
      for (uint64_t t = i.start; t < i.end; ++t) in_a[t] = true;
    for (const Interval& i : b)
      for (uint64_t t = i.start; t < i.end; ++t) in_b[t] = true;
    uint64_t both = 0;
    for (uint64_t t = 0; t < kHorizon; ++t) both += in_a[t] && in_b[t];
    ASSERT_EQ(overlap_length(a, b), both) << "trial " << trial;
  }
}

TEST(Attribute, CopiesUnderKernelsCountEveryRecordAttributedOrNot) {
  // In ms: a d2h copy [0,100) under range 7, an h2d copy [150,250) unattributed;
  // kernels [50,160) and [200,220); a memset [0,300) is not a copy.
  constexpr uint64_t ms = 1'000'000;
  const std::vector<ActivityRecord> records = {
      {ActivityKind::MemcpyD2H, 0, 100 * ms, 1, 0, 4096},   {ActivityKind::MemcpyH2D, 150 * ms, 250 * ms, 9, 0, 4096},
      {ActivityKind::Kernel, 50 * ms, 160 * ms, 2},          {ActivityKind::Kernel, 200 * ms, 220 * ms, 2},
      {ActivityKind::Memset, 0, 300 * ms, 3}};
  const TraceReport r = attribute(records, {{1, 7}, {2, 7}}, {{7, "offload", "a_1"}});
  EXPECT_DOUBLE_EQ(r.copy_busy_ms, 200);
  EXPECT_DOUBLE_EQ(r.copy_under_kernels_ms, 50 + 10 + 20);  // [50,100) + [150,160) + [200,220)
  const nlohmann::json j = trace_report_json(r);
  EXPECT_DOUBLE_EQ(j.at("copy_under_kernels_ms").get<double>(), 80);
  EXPECT_NE(format_trace_report(r).find("copies 200.000 ms, of which 80.000 ms (40%) under kernels"), std::string::npos);
}

TEST(Attribute, HandComputedTwoStagesOverlappingStreams) {
  // fwd of "h0": two kernels on two streams overlapping by 5 ns, and an h2d copy.
  // bwd of "h0": one kernel. One kernel with no link, one record incomplete.
  const std::vector<TraceRange> ranges = {{1, "fwd_keep", "h0"}, {2, "bwd", "h0"}};
  const std::vector<CorrelationLink> links = {{10, 1}, {11, 1}, {12, 1}, {20, 2}};
  std::vector<ActivityRecord> records = {
      {ActivityKind::Kernel, 0, 10, 10, 7, 0, "gemm"},
      {ActivityKind::Kernel, 5, 15, 11, 8, 0, "gelu"},
      {ActivityKind::MemcpyH2D, 20, 30, 12, 9, 4096, ""},
      {ActivityKind::Kernel, 100, 140, 20, 7, 0, "gemm_bwd"},
      {ActivityKind::Kernel, 200, 210, 99, 7, 0, "stray"},
      {ActivityKind::Kernel, 300, 250, 20, 7, 0, "incomplete"},
  };
  const TraceReport r = attribute(records, links, ranges);
  ASSERT_EQ(r.ranges.size(), 2u);
  const RangeReport& f = r.ranges[0];
  EXPECT_EQ(f.label, "memopt/fwd_keep/h0");
  EXPECT_EQ(f.num_kernels, 2);
  EXPECT_EQ(f.num_copies, 1);
  EXPECT_DOUBLE_EQ(f.kernel_busy_ms, 15e-6);  // union [0,15), not the 20 ns sum
  EXPECT_DOUBLE_EQ(f.kernel_sum_ms, 20e-6);
  EXPECT_DOUBLE_EQ(f.copy_busy_ms, 10e-6);
  EXPECT_EQ(f.h2d_bytes, 4096);
  EXPECT_EQ(f.d2h_bytes, 0);
  const RangeReport& b = r.ranges[1];
  EXPECT_EQ(b.label, "memopt/bwd/h0");
  EXPECT_DOUBLE_EQ(b.kernel_busy_ms, 40e-6);
  EXPECT_EQ(r.unattributed.num_kernels, 1);
  EXPECT_DOUBLE_EQ(r.unattributed.kernel_busy_ms, 10e-6);
  EXPECT_EQ(r.num_malformed, 1);
  EXPECT_DOUBLE_EQ(r.device_busy_ms, (15 + 10 + 40 + 10) * 1e-6);
}

TEST(Attribute, InstancesOfOneLabelSumAndTakeTheMedian) {
  // Three runs of the same stage op: busy 10, 30, 20 ns -> total 60, median 20.
  const std::vector<TraceRange> ranges = {{1, "bwd", "s"}, {2, "bwd", "s"}, {3, "bwd", "s"}};
  const std::vector<CorrelationLink> links = {{1, 1}, {2, 2}, {3, 3}};
  const std::vector<ActivityRecord> records = {{ActivityKind::Kernel, 0, 10, 1},
                                               {ActivityKind::Kernel, 100, 130, 2},
                                               {ActivityKind::Kernel, 200, 220, 3}};
  const TraceReport r = attribute(records, links, ranges);
  ASSERT_EQ(r.ranges.size(), 1u);
  EXPECT_EQ(r.ranges[0].num_instances, 3);
  EXPECT_DOUBLE_EQ(r.ranges[0].kernel_busy_ms, 60e-6);
  EXPECT_DOUBLE_EQ(r.ranges[0].median_kernel_busy_ms, 20e-6);
}

TEST(Attribute, FirstLinkWinsAndUnknownRangesAreUnattributed) {
  const std::vector<TraceRange> ranges = {{1, "fwd_keep", "a"}, {2, "fwd_keep", "b"}};
  const std::vector<CorrelationLink> links = {{5, 2}, {5, 1}, {6, 77}};
  const std::vector<ActivityRecord> records = {{ActivityKind::Kernel, 0, 10, 5}, {ActivityKind::Kernel, 0, 4, 6}};
  const TraceReport r = attribute(records, links, ranges);
  EXPECT_EQ(r.ranges[0].num_kernels, 0);
  EXPECT_EQ(r.ranges[1].num_kernels, 1);
  EXPECT_EQ(r.unattributed.num_kernels, 1);
  EXPECT_THROW(attribute({}, {}, {{1, "a", "b"}, {1, "c", "d"}}), std::invalid_argument);
}

// Random streams against a per-record scan: every record's range found by looking
// the links and ranges up linearly, each instance's busy time by the timeline.
TEST(Attribute, EqualsBruteForceOnRandomStreams) {
  std::mt19937 rng(11);
  const std::vector<std::string> stages = {"s0", "s1"}, ops = {"fwd_keep", "bwd"};
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<TraceRange> ranges;
    const int num_ranges = 1 + trial % 6;
    for (int k = 0; k < num_ranges; ++k)
      ranges.push_back({static_cast<uint64_t>(100 + k), ops[rng() % 2], stages[rng() % 2]});
    std::vector<CorrelationLink> links;
    const int num_calls = 12;
    for (uint32_t c = 0; c < num_calls; ++c)
      if (rng() % 5) links.push_back({c, static_cast<uint64_t>(100 + rng() % (num_ranges + 1))});  // some unknown
    std::vector<ActivityRecord> records;
    for (const Interval& iv : random_intervals(rng, 1 + trial % 15)) {
      ActivityRecord r;
      r.kind = rng() % 3 ? ActivityKind::Kernel : ActivityKind::MemcpyD2H;
      r.start_ns = iv.start;
      r.end_ns = iv.end;
      r.correlation_id = static_cast<uint32_t>(rng() % (num_calls + 2));
      r.num_bytes = r.kind == ActivityKind::Kernel ? 0 : 1 + static_cast<int64_t>(rng() % 1000);
      records.push_back(r);
    }
    const TraceReport got = attribute(records, links, ranges);

    // Brute force.
    const auto range_index = [&](const ActivityRecord& r) -> int {
      for (const CorrelationLink& l : links)
        if (l.correlation_id == r.correlation_id) {
          for (int k = 0; k < num_ranges; ++k)
            if (ranges[k].external_id == l.external_id) return k;
          return -1;
        }
      return -1;
    };
    std::vector<std::string> labels;
    for (const TraceRange& t : ranges) {
      const std::string l = range_label(t.op, t.stage);
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
    }
    ASSERT_EQ(got.ranges.size(), labels.size());
    std::vector<Interval> all;
    for (const ActivityRecord& r : records) all.push_back({r.start_ns, r.end_ns});
    // ns -> ms: summing per instance rounds differently; 1e-12 ms is a thousandth of a ns.
    ASSERT_NEAR(got.device_busy_ms, brute_union(all) * 1e-6, 1e-12);
    for (size_t li = 0; li < labels.size(); ++li) {
      uint64_t busy_ns = 0, copy_ns = 0;
      int64_t d2h = 0;
      int kernels = 0;
      for (int k = 0; k < num_ranges; ++k) {
        if (range_label(ranges[k].op, ranges[k].stage) != labels[li]) continue;
        std::vector<Interval> ks, cs;
        for (const ActivityRecord& r : records) {
          if (range_index(r) != k) continue;
          if (r.kind == ActivityKind::Kernel) {
            ks.push_back({r.start_ns, r.end_ns});
            ++kernels;
          } else {
            cs.push_back({r.start_ns, r.end_ns});
            d2h += r.num_bytes;
          }
        }
        busy_ns += brute_union(ks);
        copy_ns += brute_union(cs);
      }
      const RangeReport& g = got.ranges[li];
      ASSERT_EQ(g.label, labels[li]);
      ASSERT_EQ(g.num_kernels, kernels) << "trial " << trial;
      ASSERT_NEAR(g.kernel_busy_ms, busy_ns * 1e-6, 1e-12) << "trial " << trial;
      ASSERT_NEAR(g.copy_busy_ms, copy_ns * 1e-6, 1e-12) << "trial " << trial;
      ASSERT_EQ(g.d2h_bytes, d2h);
    }
  }
}

// A tracer whose "device" hands back canned records: the base class's bookkeeping
// (external ids in push order, labels, nesting checks) is what a CUDA tracer relies on.
class CannedTracer : public StageTracer {
 public:
  std::vector<uint64_t> begun, ended;
  std::vector<std::string> labels;

 protected:
  void on_begin(uint64_t id, const std::string& label) override {
    begun.push_back(id);
    labels.push_back(label);
  }
  void on_end(uint64_t id) override { ended.push_back(id); }
  void drain(std::vector<ActivityRecord>& records, std::vector<CorrelationLink>& links) override {
    // One kernel of 10 ns per range, launched under it.
    for (size_t k = 0; k < begun.size(); ++k) {
      records.push_back({ActivityKind::Kernel, 100 * k, 100 * k + 10, static_cast<uint32_t>(k)});
      links.push_back({static_cast<uint32_t>(k), begun[k]});
    }
  }
};

TEST(StageTracer, AssignsIdsLabelsAndAttributesThroughTheHooks) {
  CannedTracer t;
  {
    StageRange r(&t, "fwd_keep", "h0");
  }
  {
    StageRange r(&t, "bwd", "h0");
    EXPECT_THROW(t.begin("bwd", "h1"), std::logic_error);  // no nesting
    EXPECT_THROW(t.collect(), std::logic_error);           // not while open
  }
  EXPECT_THROW(t.end(), std::logic_error);
  EXPECT_EQ(t.begun, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(t.ended, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"memopt/fwd_keep/h0", "memopt/bwd/h0"}));
  const TraceReport r = t.collect();
  ASSERT_EQ(r.ranges.size(), 2u);
  EXPECT_DOUBLE_EQ(r.ranges[0].kernel_busy_ms, 10e-6);
  EXPECT_DOUBLE_EQ(r.ranges[1].kernel_busy_ms, 10e-6);
  EXPECT_EQ(t.num_pending_ranges(), 0u);
  StageRange none(nullptr, "x", "y");  // no tracer: nothing happens
}

TEST(StageTracer, BaseClassIsTheCpuTracerRangesWithoutActivity) {
  StageTracer t;
  t.begin("fwd_keep", "s");
  t.end();
  const TraceReport r = t.collect();
  ASSERT_EQ(r.ranges.size(), 1u);
  EXPECT_EQ(r.ranges[0].num_instances, 1);
  EXPECT_EQ(r.ranges[0].num_kernels, 0);
  EXPECT_EQ(trace_report_json(r)["ranges"][0]["label"], "memopt/fwd_keep/s");
  EXPECT_NE(format_trace_report(r).find("memopt/fwd_keep/s"), std::string::npos);
}

// Records the device lost reach the report, its JSON and a warning line; none, no line.
TEST(StageTracer, LostRecordsAreReportedAndWarnedAbout) {
  class Lossy final : public StageTracer {
   protected:
    int64_t num_lost_records() override { return 3; }
  } lossy;
  lossy.begin("bwd", "s");
  lossy.end();
  const TraceReport r = lossy.collect();
  EXPECT_EQ(r.num_lost_records, 3);
  EXPECT_EQ(trace_report_json(r)["num_lost_records"], 3);
  EXPECT_NE(format_trace_report(r).find("WARNING: the tracer lost 3 records"), std::string::npos);
  StageTracer whole;
  EXPECT_EQ(format_trace_report(whole.collect()).find("WARNING"), std::string::npos);
}

}  // namespace
}  // namespace memopt::measure

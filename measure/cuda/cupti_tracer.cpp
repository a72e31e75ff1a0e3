// cupti_tracer.cpp: CUPTI activity buffers -> ActivityRecord / CorrelationLink.
#include "measure/cuda/cupti_tracer.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

namespace memopt::measure::cuda {
namespace {

// Note [No NVTX capture through CUPTI]
// CUPTI can record NVTX ranges itself (CUPTI_ACTIVITY_KIND_MARKER), which would
// make the external ids redundant, but that path is reported to crash with CUPTI
// 13.0.0. The NVTX ranges here are for Nsight Systems only; attribution uses the
// external correlation ids, and MARKER stays disabled.
constexpr CUpti_ExternalCorrelationKind kKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = "unknown error";
  cuptiGetResultString(r, &text);
  throw std::runtime_error(std::string("CUPTI: ") + what + ": " + text);
}

// Where CUPTI's completion callback (a plain function, any thread) leaves records.
struct Sink {
  std::mutex mutex;
  std::vector<ActivityRecord> records;
  std::vector<CorrelationLink> links;
};
Sink& sink() {
  static Sink* s = new Sink;  // outlives late callbacks at exit
  return *s;
}
std::atomic<bool> g_active{false};

ActivityKind memcpy_kind(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return ActivityKind::MemcpyH2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return ActivityKind::MemcpyD2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return ActivityKind::MemcpyD2D;
    default: return ActivityKind::MemcpyOther;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_num_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_num_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::vector<ActivityRecord> records;
  std::vector<CorrelationLink> links;
  CUpti_Activity* raw = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &raw) == CUPTI_SUCCESS) {
    switch (raw->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(raw);
        records.push_back({ActivityKind::Kernel, k->start, k->end, k->correlationId, k->streamId, 0,
                           k->name ? k->name : ""});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(raw);
        records.push_back({memcpy_kind(m->copyKind), m->start, m->end, m->correlationId, m->streamId,
                           static_cast<int64_t>(m->bytes), ""});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(raw);
        records.push_back({ActivityKind::Memset, m->start, m->end, m->correlationId, m->streamId,
                           static_cast<int64_t>(m->bytes), ""});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(raw);
        if (e->externalKind == kKind) links.push_back({e->correlationId, e->externalId});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(sink().mutex);
  Sink& s = sink();
  s.records.insert(s.records.end(), records.begin(), records.end());
  s.links.insert(s.links.end(), links.begin(), links.end());
}

class CuptiTracer final : public StageTracer {
 public:
  CuptiTracer() {
    if (g_active.exchange(true)) throw std::logic_error("CUPTI tracer: one is already running in this process");
    try {
      check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "registering buffers");
      for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "enabling an activity kind");
    } catch (...) {
      g_active = false;
      throw;
    }
  }
  ~CuptiTracer() override {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().records.clear();
    sink().links.clear();
    g_active = false;
  }

 protected:
  void on_begin(uint64_t external_id, const std::string& label) override {
    check(cuptiActivityPushExternalCorrelationId(kKind, external_id), "pushing an external correlation id");
    nvtxRangePushA(label.c_str());
  }
  void on_end(uint64_t) override {
    nvtxRangePop();
    uint64_t popped = 0;
    check(cuptiActivityPopExternalCorrelationId(kKind, &popped), "popping an external correlation id");
  }
  void drain(std::vector<ActivityRecord>& records, std::vector<CorrelationLink>& links) override {
    // Forced: also hands over buffers still being filled, so a report right after a
    // stage sees that stage's records (the work has finished: the timer synchronized).
    check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing activity buffers");
    std::lock_guard<std::mutex> lock(sink().mutex);
    Sink& s = sink();
    records.insert(records.end(), s.records.begin(), s.records.end());
    links.insert(links.end(), s.links.begin(), s.links.end());
    s.records.clear();
    s.links.clear();
  }
};

}  // namespace

std::unique_ptr<StageTracer> make_cupti_tracer() { return std::make_unique<CuptiTracer>(); }

}  // namespace memopt::measure::cuda

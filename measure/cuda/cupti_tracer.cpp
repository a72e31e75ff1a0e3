// cupti_tracer.cpp: CUPTI activity buffers -> ActivityRecord / CorrelationLink.
#include "measure/cuda/cupti_tracer.h"

#include "measure/thread_ranges.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cupti.h>
#include <memory>
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
// CUPTI makes an external correlation record for each CUDA API call it records, so
// the runtime and driver API kinds are on too (their own records are dropped here).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};

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
  int64_t num_dropped = 0;  // records CUPTI had no buffer space for
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

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_bytes) {
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
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) != CUPTI_SUCCESS) dropped = 0;
  std::lock_guard<std::mutex> lock(sink().mutex);
  Sink& s = sink();
  s.num_dropped += static_cast<int64_t>(dropped);
  s.records.insert(s.records.end(), records.begin(), records.end());
  s.links.insert(s.links.end(), links.begin(), links.end());
}

// Pushes on the calling thread's external correlation stack, from any thread (Note
// [Ranges on every thread]); a failure there cannot be thrown through ATen's callback,
// so it is counted and reported.
std::atomic<int64_t> g_thread_push_failures{0};
void push_on_this_thread(uint64_t id) {
  if (cuptiActivityPushExternalCorrelationId(kKind, id) != CUPTI_SUCCESS) ++g_thread_push_failures;
}
void pop_on_this_thread() {
  uint64_t popped = 0;
  if (cuptiActivityPopExternalCorrelationId(kKind, &popped) != CUPTI_SUCCESS) ++g_thread_push_failures;
}

class CuptiTracer final : public StageTracer {
 public:
  CuptiTracer() {
    if (g_active.exchange(true)) throw std::logic_error("CUPTI tracer: one is already running in this process");
    try {
      check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "registering buffers");
      for (CUpti_ActivityKind k : kKinds) check(cuptiActivityEnable(k), "enabling an activity kind");
      thread_ranges_ = std::make_unique<ThreadRanges>(push_on_this_thread, pop_on_this_thread);
    } catch (...) {
      for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
      g_active = false;
      throw;
    }
  }
  ~CuptiTracer() override {
    thread_ranges_.reset();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().records.clear();
    sink().links.clear();
    sink().num_dropped = 0;
    g_active = false;
  }

 protected:
  void on_begin(uint64_t external_id, const std::string& label) override {
    check(cuptiActivityPushExternalCorrelationId(kKind, external_id), "pushing an external correlation id");
    nvtxRangePushA(label.c_str());
    thread_ranges_->set_open(external_id);
  }
  void on_end(uint64_t) override {
    thread_ranges_->set_open(0);
    nvtxRangePop();
    uint64_t popped = 0;
    check(cuptiActivityPopExternalCorrelationId(kKind, &popped), "popping an external correlation id");
  }
  int64_t num_lost_records() override {
    std::lock_guard<std::mutex> lock(sink().mutex);
    return sink().num_dropped + g_thread_push_failures.load();
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

 private:
  std::unique_ptr<ThreadRanges> thread_ranges_;
};

}  // namespace

std::unique_ptr<StageTracer> make_cupti_tracer() { return std::make_unique<CuptiTracer>(); }

}  // namespace memopt::measure::cuda

// cuda_copy_engine.cpp: streams, events and pinned memory; no decisions. What to copy
// and when is the schedule's; the pool's bookkeeping is HostArena's.
#include "runtime/cuda/cuda_copy_engine.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
// c10's event, not ATen's: ATen/cuda/CUDAEvent.h pulls in cuBLAS and cuSPARSE headers
// through CUDAContext.h, which a toolkit without those libraries lacks; c10's is in
// every torch memopt supports (scripts/check_torch_compat.sh builds against 2.11).
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "runtime/host_arena.h"

namespace memopt::runtime::cuda {
namespace {

// Note [Copies hold their tensors]
// The caching allocator ties each block to the stream it was allocated on (compute)
// and hands it out again as soon as it is freed, in that stream's order. A copy
// stream reading (offload) or writing (prefetch) a block must therefore keep it
// alive until the copy has ended, as the CPU engine's worker does. recordStream
// would do it too, but it defers the free behind everything queued on the copy
// stream by the time the tensor is freed -- later copies included -- so reserved
// memory and, with it, what the device can hold drift from the plan; and the
// executor already holds each offloaded tensor until the op the simulator finished
// its copy by (Note [Offloads end when the simulator says] in executor.h). So a
// transfer holds its device tensor itself and lets go of it once it has seen the
// copy end (wait(), done(), or its own end, which first waits for the copy); no
// block is ever recorded on a copy stream. A prefetch's fresh block is allocated on
// the compute stream, so the copy stream first waits for the compute stream, and
// the compute stream waits for the copy before it reads the block.

// One pinned allocation for the engine's life: pinning is slow (page-locking) and
// per-tensor pinning stalls the step; pageable memory would make copies synchronous.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(int64_t num_bytes) {
    if (num_bytes > 0) C10_CUDA_CHECK(cudaHostAlloc(&ptr_, static_cast<size_t>(num_bytes), cudaHostAllocDefault));
  }
  ~PinnedBuffer() {
    if (ptr_) C10_CUDA_IGNORE_ERROR(cudaFreeHost(ptr_));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

class CudaTransfer final : public Transfer {
 public:
  explicit CudaTransfer(c10::DeviceIndex device) : device_index_(device) {}
  // Never frees a block a copy may still read or write (Note [Copies hold their tensors]).
  ~CudaTransfer() override {
    try {
      if (device_.defined()) done_.synchronize();
    } catch (...) {  // a destructor must not throw; a failed device is reported elsewhere
    }
  }
  void wait() const override {
    done_.synchronize();
    if (releases_at_end_) device_ = at::Tensor();
  }
  bool done() const override {
    const bool finished = done_.query();
    if (finished && releases_at_end_) device_ = at::Tensor();
    return finished;
  }
  double copy_ms() const override { return done() ? start_.elapsed_time(done_) : 0.0; }
  at::Tensor take_device_tensor() override {
    // The compute stream waits for the copy; the host does not.
    done_.block(c10::cuda::getCurrentCUDAStream(device_index_));
    return std::move(device_);
  }

  c10::DeviceIndex device_index_;
  c10::cuda::CUDAEvent start_{cudaEventDefault};  // timing enabled: copy_ms
  c10::cuda::CUDAEvent done_{cudaEventDefault};
  // Offload: the source, until the copy is seen to have ended (releases_at_end_);
  // prefetch: the tensor being filled, until taken.
  mutable at::Tensor device_;
  bool releases_at_end_ = false;
  std::byte* host_ = nullptr;
  int64_t num_bytes_ = 0;
  at::TensorOptions options_;
  std::vector<int64_t> sizes_;
};

// `stream` waits (on the device) for everything queued so far on `before`.
void order_after(const c10::cuda::CUDAStream& stream, const c10::cuda::CUDAStream& before) {
  c10::cuda::CUDAEvent ready;
  ready.record(before);
  ready.block(stream);
}

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(c10::DeviceIndex device, const CopyEngineOptions& options)
      : device_(device),
        d2h_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)),
        h2d_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)),
        pinned_(options.host_pool_bytes),
        arena_(options.host_pool_bytes) {}
  // Copies still queued read or write the pinned pool, which is freed after this body.
  ~CudaCopyEngine() override {
    try {
      d2h_.synchronize();
      h2d_.synchronize();
    } catch (...) {  // a destructor must not throw; a failed device is reported elsewhere
    }
  }
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  std::shared_ptr<Transfer> offload(const at::Tensor& device_tensor) override {
    check_on_device(device_tensor, "offload");
    if (!device_tensor.is_contiguous()) throw std::invalid_argument("copy engine: offload needs a contiguous tensor");
    c10::cuda::CUDAGuard guard(device_);
    auto t = std::make_shared<CudaTransfer>(device_);
    t->num_bytes_ = static_cast<int64_t>(device_tensor.nbytes());
    t->host_ = pinned_.data() + arena_.take(t->num_bytes_);
    t->options_ = device_tensor.options();
    t->sizes_ = device_tensor.sizes().vec();
    order_after(d2h_, c10::cuda::getCurrentCUDAStream(device_));  // the copy reads what compute wrote
    t->start_.record(d2h_);
    C10_CUDA_CHECK(cudaMemcpyAsync(t->host_, device_tensor.data_ptr(), static_cast<size_t>(t->num_bytes_),
                                   cudaMemcpyDeviceToHost, d2h_.stream()));
    t->done_.record(d2h_);
    t->device_ = device_tensor;  // Note [Copies hold their tensors]
    t->releases_at_end_ = true;
    return t;
  }

  std::shared_ptr<Transfer> prefetch(const std::shared_ptr<Transfer>& offloaded_transfer) override {
    const auto offloaded = std::dynamic_pointer_cast<CudaTransfer>(offloaded_transfer);
    if (!offloaded) throw std::invalid_argument("copy engine: prefetch of a transfer the CUDA engine did not offload");
    c10::cuda::CUDAGuard guard(device_);
    auto t = std::make_shared<CudaTransfer>(device_);
    t->num_bytes_ = offloaded->num_bytes_;
    t->host_ = offloaded->host_;
    t->device_ = at::empty(offloaded->sizes_, offloaded->options_);  // allocated at issue, on the compute stream
    order_after(h2d_, c10::cuda::getCurrentCUDAStream(device_));    // Note [Copies hold their tensors]
    offloaded->done_.block(h2d_);                                   // the host bytes are there
    t->start_.record(h2d_);
    C10_CUDA_CHECK(cudaMemcpyAsync(t->device_.data_ptr(), t->host_, static_cast<size_t>(t->num_bytes_),
                                   cudaMemcpyHostToDevice, h2d_.stream()));
    t->done_.record(h2d_);
    return t;
  }

  void finish_step() override {
    d2h_.synchronize();
    h2d_.synchronize();
    arena_.reset();
  }

  int64_t host_pool_bytes() const override { return arena_.capacity_bytes(); }

 private:
  void check_on_device(const at::Tensor& t, const char* what) const {
    if (!t.is_cuda() || t.get_device() != device_)
      throw std::invalid_argument(std::string("copy engine: ") + what + " of a tensor on " + t.device().str() +
                                  "; this engine copies for cuda:" + std::to_string(device_));
  }

  c10::DeviceIndex device_;
  c10::cuda::CUDAStream d2h_;
  c10::cuda::CUDAStream h2d_;
  PinnedBuffer pinned_;
  HostArena arena_;
};

}  // namespace

std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device_index, const CopyEngineOptions& options) {
  const int visible = c10::cuda::device_count();
  if (device_index < 0 || device_index >= visible)
    throw std::invalid_argument("copy engine: no CUDA device cuda:" + std::to_string(device_index) + " (" +
                                std::to_string(visible) + " visible); check CUDA_VISIBLE_DEVICES and the driver");
  return std::make_unique<CudaCopyEngine>(static_cast<c10::DeviceIndex>(device_index), options);
}

}  // namespace memopt::runtime::cuda

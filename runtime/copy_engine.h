// copy_engine.h: moves activations between device and host memory beside the compute
// stream -- offload, prefetch, wait -- as the two links of docs/formats.md, "Offload: the timeline
// simulator" do. The CPU
// testbed's engine (here) uses one worker thread per direction; the CUDA one
// (runtime/cuda/) uses copy streams, events and pinned memory behind the same interface;
// make_copy_engine picks by device. The pool bookkeeping both share is HostArena.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "runtime/host_arena.h"

namespace memopt::runtime {

// One copy in flight or done. The executor keeps it from offload to prefetch.
class Transfer {
 public:
  virtual ~Transfer() = default;
  virtual void wait() const = 0;       // blocks the host until the copy has finished
  virtual bool done() const = 0;
  virtual double copy_ms() const = 0;  // how long the copy itself took (0 until done)
  // After a prefetch: hands over the tensor back on the device, usable by the compute
  // stream (the CPU engine waits for the copy; the CUDA engine makes the compute
  // stream wait, without blocking the host). The transfer keeps no reference, so
  // the executor alone decides when it is freed.
  virtual at::Tensor take_device_tensor() = 0;
};

// What an offload leaves its caller: the device tensor it moves and its copy. The
// engine lets go of the device tensor when the copy ends; a caller that keeps it
// decides itself when the device bytes go (Note [Offloads end when the simulator says]
// in executor.h).
struct OutboundCopy {
  at::Tensor device;
  std::shared_ptr<Transfer> transfer;
};

// Whether a tensor has device memory of its own that a copy engine can read: not a
// fake, functional or meta tensor, nor one without storage (Note [Tensors with no memory
// of their own] in saved_state.cpp).
bool has_own_memory(const at::Tensor& t);

struct CopyEngineOptions {
  // Emulated link speed per direction (bytes/s); 0 copies as fast as memory allows.
  // Only the CPU engine emulates; a real link runs at its own speed.
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // Host pool size; every offloaded byte of a step must fit (HostArena::bytes_for).
  // Allocated once.
  int64_t host_pool_bytes = 0;
};

// Moves activations beside the compute stream. One engine per device; the executor
// calls offload and prefetch in schedule order and finish_step between steps.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Queues the copy of `device_tensor` (contiguous) to the host; the device memory is
  // released once the copy has read it. Returns at once.
  virtual std::shared_ptr<Transfer> offload(const at::Tensor& device_tensor) = 0;
  // Allocates the device tensor now (docs/formats.md, "Offload: the timeline simulator": at issue)
  // and queues the copy back; the
  // copy starts after `offloaded` (a transfer of this engine) has finished.
  virtual std::shared_ptr<Transfer> prefetch(const std::shared_ptr<Transfer>& offloaded) = 0;
  // Between steps: wait for everything and recycle the host pool.
  virtual void finish_step() = 0;
  virtual int64_t host_pool_bytes() const = 0;
};

// The engine for tensors on `device`: worker threads for the CPU, copy streams for a
// CUDA device (only when built with MEMOPT_CUDA; otherwise, or without a visible
// device, throws std::invalid_argument naming the fix).
std::unique_ptr<CopyEngine> make_copy_engine(const c10::Device& device, const CopyEngineOptions& options);

// The CPU engine's transfer: done when its worker thread says so.
class CpuTransfer final : public Transfer {
 public:
  void wait() const override;
  bool done() const override;
  double copy_ms() const override;
  at::Tensor take_device_tensor() override;

 private:
  friend class CpuCopyEngine;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  double copy_ms_ = 0;
  // Offload: the device tensor until its copy ends (then released: the simulator frees the
  // device copy when the transfer ends), and where its bytes went on the host.
  at::Tensor device_;
  std::byte* host_ = nullptr;
  int64_t num_bytes_ = 0;
  at::TensorOptions options_;
  std::vector<int64_t> sizes_;
};

// Host memory for offloaded activations, taken once from the OS (not through the
// counting allocator, so the device accounting stays honest) and handed out in
// step order by a HostArena; reset() recycles it between steps.
class HostPool {
 public:
  explicit HostPool(int64_t num_bytes);
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  std::byte* take(int64_t num_bytes) { return base_ + arena_.take(num_bytes); }  // throws when exhausted
  void reset() { arena_.reset(); }
  int64_t capacity_bytes() const { return arena_.capacity_bytes(); }
  int64_t used_bytes() const { return arena_.used_bytes(); }

 private:
  std::byte* base_ = nullptr;
  HostArena arena_;
};

class CpuCopyEngine final : public CopyEngine {
 public:
  explicit CpuCopyEngine(const CopyEngineOptions& options);
  ~CpuCopyEngine() override;
  CpuCopyEngine(const CpuCopyEngine&) = delete;
  CpuCopyEngine& operator=(const CpuCopyEngine&) = delete;

  std::shared_ptr<Transfer> offload(const at::Tensor& device_tensor) override;
  std::shared_ptr<Transfer> prefetch(const std::shared_ptr<Transfer>& offloaded) override;
  void finish_step() override;
  int64_t host_pool_bytes() const override { return pool_.capacity_bytes(); }

 private:
  // A FIFO queue served by one thread: one per direction, full duplex as PCIe is.
  class Link {
   public:
    explicit Link(double bytes_per_s);
    ~Link();
    // `after`, when set, must finish before this copy starts (a prefetch waits for
    // its offload). With `release_device_at_end` (an offload) the transfer lets go of
    // its device tensor when the copy ends on the emulated link.
    void submit(std::function<void()> work, int64_t num_bytes, std::shared_ptr<CpuTransfer> transfer,
                std::shared_ptr<Transfer> after = nullptr, bool release_device_at_end = false);
    void drain();

   private:
    void run();
    struct Job {
      std::function<void()> work;
      int64_t num_bytes;
      std::shared_ptr<CpuTransfer> transfer;
      std::shared_ptr<Transfer> after;
      bool release_device_at_end = false;
    };
    double bytes_per_s_;
    std::mutex mutex_;
    std::condition_variable cv_, idle_cv_;
    std::deque<Job> jobs_;
    bool busy_ = false;
    bool stop_ = false;
    std::thread thread_;
  };

  HostPool pool_;
  Link d2h_;
  Link h2d_;
};

// Measures the engine's link as the executor will use it: median bandwidth of
// `repeat` offloads and prefetches of one `num_bytes` tensor through the engine of
// `device` with these caps (CPU: 0 is uncapped, so it measures memcpy between device
// and host memory; CUDA: the caps are ignored, the link is PCIe/NVLink itself).
struct LinkBandwidth {
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
};
LinkBandwidth measure_copy_bandwidth(double d2h_cap_bytes_per_s, double h2d_cap_bytes_per_s,
                                     int64_t num_bytes = 64 << 20, int repeat = 5,
                                     c10::Device device = c10::Device(c10::kCPU));

}  // namespace memopt::runtime

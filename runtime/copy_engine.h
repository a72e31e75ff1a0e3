// copy_engine.h: moves activations between device and host memory beside the compute
// stream -- offload, prefetch, wait -- as SPEC section 5's two links do. The CPU
// testbed's engine (here) uses one worker thread per direction; the CUDA one
// (runtime/cuda/) uses copy streams, events and pinned memory behind the same interface.
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

namespace memopt::runtime {

// One copy in flight or done. The executor keeps it from offload to prefetch.
class Transfer {
 public:
  void wait() const;        // blocks until the copy has finished
  bool done() const;
  double copy_ms() const;   // how long the copy itself took (0 until done)
  // After a prefetch: waits, then hands over the tensor back on the device (the
  // transfer keeps no reference, so the executor alone decides when it is freed).
  at::Tensor take_device_tensor();

 private:
  friend class CpuCopyEngine;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  double copy_ms_ = 0;
  // Offload: the device tensor until its copy ends (then released: SPEC frees the
  // device copy when the transfer ends), and where its bytes went on the host.
  at::Tensor device_;
  std::byte* host_ = nullptr;
  int64_t num_bytes_ = 0;
  at::TensorOptions options_;
  std::vector<int64_t> sizes_;
};

struct CopyEngineOptions {
  // Emulated link speed per direction (bytes/s); 0 copies as fast as memory allows.
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // Host pool size; every offloaded byte of a step must fit. Allocated once.
  int64_t host_pool_bytes = 0;
};

// Host memory for offloaded activations, taken once from the OS (not through the
// counting allocator, so the device accounting stays honest) and handed out in
// step order; reset() recycles it between steps.
class HostPool {
 public:
  explicit HostPool(int64_t num_bytes);
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  std::byte* take(int64_t num_bytes);  // throws when the pool is exhausted
  void reset();
  int64_t capacity_bytes() const { return capacity_; }
  int64_t used_bytes() const { return used_; }

 private:
  std::byte* base_ = nullptr;
  int64_t capacity_ = 0;
  int64_t used_ = 0;
};

class CpuCopyEngine {
 public:
  explicit CpuCopyEngine(const CopyEngineOptions& options);
  ~CpuCopyEngine();
  CpuCopyEngine(const CpuCopyEngine&) = delete;
  CpuCopyEngine& operator=(const CpuCopyEngine&) = delete;

  // Queues the copy of `device_tensor` (contiguous) to the host; the device tensor is
  // released when the copy ends. Returns at once.
  std::shared_ptr<Transfer> offload(const at::Tensor& device_tensor);
  // Allocates the device tensor now (SPEC: at issue) and queues the copy back; the
  // copy starts after `offloaded` has finished.
  std::shared_ptr<Transfer> prefetch(const std::shared_ptr<Transfer>& offloaded);
  // Between steps: wait for everything and recycle the host pool.
  void finish_step();
  int64_t host_pool_bytes() const { return pool_.capacity_bytes(); }

 private:
  // A FIFO queue served by one thread: one per direction, full duplex as PCIe is.
  class Link {
   public:
    explicit Link(double bytes_per_s);
    ~Link();
    // `after`, when set, must finish before this copy starts (a prefetch waits for
    // its offload).
    void submit(std::function<void()> work, int64_t num_bytes, std::shared_ptr<Transfer> transfer,
                std::shared_ptr<Transfer> after = nullptr);
    void drain();

   private:
    void run();
    struct Job {
      std::function<void()> work;
      int64_t num_bytes;
      std::shared_ptr<Transfer> transfer;
      std::shared_ptr<Transfer> after;
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
// `repeat` offloads and prefetches of one `num_bytes` tensor through an engine with
// these caps (0: uncapped, so it measures memcpy between device and host memory).
struct LinkBandwidth {
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
};
LinkBandwidth measure_copy_bandwidth(double d2h_cap_bytes_per_s, double h2d_cap_bytes_per_s,
                                     int64_t num_bytes = 64 << 20, int repeat = 5);

}  // namespace memopt::runtime

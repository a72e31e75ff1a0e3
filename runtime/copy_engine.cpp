// copy_engine.cpp: the CPU testbed's copy engine.
#include "runtime/copy_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "common/stats.h"

namespace memopt::runtime {
namespace {

using Clock = std::chrono::steady_clock;


}  // namespace

bool has_own_memory(const at::Tensor& t) {
  return t.has_storage() && !t.is_meta() && !t.key_set().has(c10::DispatchKey::Python) &&
         !t.key_set().has(c10::DispatchKey::Functionalize);
}

void CpuTransfer::wait() const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool CpuTransfer::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

double CpuTransfer::copy_ms() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return copy_ms_;
}

at::Tensor CpuTransfer::take_device_tensor() {
  wait();
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(device_);
}

HostPool::HostPool(int64_t num_bytes) : arena_(num_bytes) {
  if (num_bytes > 0) {
    // Page-aligned, like pinned memory would be; malloc'd directly so that the
    // counting CPU allocator (the testbed's device) never sees host bytes.
    const auto rounded = static_cast<size_t>((num_bytes + 4095) / 4096 * 4096);
    base_ = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    if (!base_) throw std::runtime_error("copy engine: cannot allocate a host pool of " + std::to_string(num_bytes) + " bytes");
    // Touched once here, as pinning makes a GPU's host pool resident: a copy never
    // pays the first-touch page faults of its destination.
    std::memset(base_, 0, rounded);
  }
}

HostPool::~HostPool() { std::free(base_); }

CpuCopyEngine::Link::Link(double bytes_per_s) : bytes_per_s_(bytes_per_s), thread_([this] { run(); }) {}

CpuCopyEngine::Link::~Link() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CpuCopyEngine::Link::submit(std::function<void()> work, int64_t num_bytes, std::shared_ptr<CpuTransfer> transfer,
                                  std::shared_ptr<Transfer> after, bool release_device_at_end) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back({std::move(work), num_bytes, std::move(transfer), std::move(after), release_device_at_end});
  }
  cv_.notify_all();
}

void CpuCopyEngine::Link::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

void CpuCopyEngine::Link::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_ && jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    if (job.after) job.after->wait();
    const auto start = Clock::now();
    job.work();
    // An emulated link takes at least num_bytes / bandwidth, however fast memcpy is.
    if (bytes_per_s_ > 0) {
      const auto until = start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(static_cast<double>(job.num_bytes) / bytes_per_s_));
      std::this_thread::sleep_until(until);
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    {
      CpuTransfer& t = *job.transfer;
      std::lock_guard<std::mutex> lock(t.mutex_);
      if (job.release_device_at_end) t.device_ = at::Tensor();
      t.copy_ms_ = ms;
      t.done_ = true;
      t.cv_.notify_all();
    }
    // Whatever the job still holds (its closure's tensors, the last reference to its
    // transfer) goes before the link reports idle, so that memory measured after
    // finish_step() never counts it.
    job = Job{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      if (jobs_.empty()) idle_cv_.notify_all();
    }
  }
}

CpuCopyEngine::CpuCopyEngine(const CopyEngineOptions& options)
    : pool_(options.host_pool_bytes), d2h_(options.d2h_bytes_per_s), h2d_(options.h2d_bytes_per_s) {}

CpuCopyEngine::~CpuCopyEngine() = default;

std::shared_ptr<Transfer> CpuCopyEngine::offload(const at::Tensor& device_tensor) {
  if (!device_tensor.is_contiguous()) throw std::invalid_argument("copy engine: offload needs a contiguous tensor");
  // Checked here, on the caller's thread: the link's thread reads the bytes later, and
  // an error there could reach no caller.
  if (!has_own_memory(device_tensor))
    throw std::invalid_argument("copy engine: offload of a tensor with no memory of its own (fake, meta or without "
                                "storage)");
  auto t = std::make_shared<CpuTransfer>();
  t->num_bytes_ = static_cast<int64_t>(device_tensor.nbytes());
  t->host_ = pool_.take(t->num_bytes_);
  t->options_ = device_tensor.options();
  t->sizes_ = device_tensor.sizes().vec();
  t->device_ = device_tensor;
  CpuTransfer* raw = t.get();
  // The device copy is freed when the transfer ends on the emulated link, not when
  // memcpy is done reading it (Link::run).
  d2h_.submit([raw] { std::memcpy(raw->host_, raw->device_.data_ptr(), static_cast<size_t>(raw->num_bytes_)); },
              t->num_bytes_, t, /*after=*/nullptr, /*release_device_at_end=*/true);
  return t;
}

std::shared_ptr<Transfer> CpuCopyEngine::prefetch(const std::shared_ptr<Transfer>& offloaded_transfer) {
  const auto offloaded = std::dynamic_pointer_cast<CpuTransfer>(offloaded_transfer);
  if (!offloaded) throw std::invalid_argument("copy engine: prefetch of a transfer the CPU engine did not offload");
  auto t = std::make_shared<CpuTransfer>();
  t->num_bytes_ = offloaded->num_bytes_;
  t->host_ = offloaded->host_;
  t->device_ = at::empty(offloaded->sizes_, offloaded->options_);  // allocated at issue
  CpuTransfer* raw = t.get();
  h2d_.submit([raw] { std::memcpy(raw->device_.data_ptr(), raw->host_, static_cast<size_t>(raw->num_bytes_)); },
              t->num_bytes_, t, /*after=*/offloaded);
  return t;
}

void CpuCopyEngine::finish_step() {
  d2h_.drain();
  h2d_.drain();
  pool_.reset();
}

LinkBandwidth measure_copy_bandwidth(double d2h_cap_bytes_per_s, double h2d_cap_bytes_per_s, int64_t num_bytes,
                                     int repeat, c10::Device device) {
  auto engine = make_copy_engine(
      device, {d2h_cap_bytes_per_s, h2d_cap_bytes_per_s, HostArena::bytes_for(std::vector<int64_t>{num_bytes})});
  // Touch the pool and the tensor once so that page faults do not count as link time.
  const at::Tensor on_device = at::ones({num_bytes / 4}, at::TensorOptions(at::kFloat).device(device));
  std::vector<double> d2h, h2d;
  for (int r = 0; r <= repeat; ++r) {
    auto out = engine->offload(on_device);
    out->wait();
    auto back = engine->prefetch(out);
    back->take_device_tensor();
    back->wait();
    engine->finish_step();
    if (r == 0) continue;  // warm-up
    d2h.push_back(static_cast<double>(num_bytes) / (out->copy_ms() / 1000.0));
    h2d.push_back(static_cast<double>(num_bytes) / (back->copy_ms() / 1000.0));
  }
  return {common::median(d2h), common::median(h2d)};
}

}  // namespace memopt::runtime

// comm.cpp: Comm on c10d::ProcessGroupGloo. The only file that includes c10d.
#include "distributed/comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>

#include <algorithm>
#include <cstdlib>

namespace memopt::distributed {

struct Comm::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::vector<int> global_ranks;  // group rank -> global rank
  int rank = 0;
  CommOptions options;
  std::string where;  // "rank 1/4" for errors
  std::string master_addr;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>> pending;

  template <typename Fn>
  void run(const char* op, Fn&& fn) {
    try {
      c10::intrusive_ptr<c10d::Work> work = fn();
      if (!work->wait(options.timeout)) throw std::runtime_error("timed out");
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& e) {
      std::string msg = e.what();
      if (const auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
      throw DistributedError(where + ": " + op + " failed: " + msg +
                             " -- another rank probably died or hung (every op waits at most " +
                             std::to_string(options.timeout.count() / 1000.0).substr(0, 6) +
                             " s); check the other ranks' output");
    }
  }
};

namespace {

// Note [A dead peer is an error, not a signal]
// Gloo writes to its peers' sockets with writev, which cannot ask the kernel to
// hold back SIGPIPE. When a peer dies, a write that races Gloo's own detection of
// the closed socket raises SIGPIPE, whose default action ends this process
// silently -- no error, no message naming the rank. Python ignores SIGPIPE at
// start-up, which is why torch.distributed never shows this. A process that joins
// a group does the same here, unless its program installed a handler of its own;
// the write then fails with EPIPE and the op throws DistributedError.
void ignore_broken_pipes() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

// As torch.distributed picks it: GLOO_SOCKET_IFNAME when set; loopback when the
// master is on loopback (one machine); otherwise the interface of this host's name.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> make_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                      const CommOptions& options, const std::string& master_addr) {
  auto opts = c10d::ProcessGroupGloo::Options::create(options.timeout);
  opts->devices.push_back(gloo_device(master_addr));
  opts->threads = 1;  // one Gloo thread: the compute thread is the bottleneck here
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

}  // namespace

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;

std::shared_ptr<Comm> Comm::connect(const LaunchEnv& env, const CommOptions& options) {
  ignore_broken_pipes();  // Note [A dead peer is an error, not a signal]
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->rank = env.rank;
  impl->where = "rank " + std::to_string(env.rank) + "/" + std::to_string(env.world_size);
  for (int r = 0; r < env.world_size; ++r) impl->global_ranks.push_back(r);
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(env.master_port);
    so.isServer = env.rank == 0 && !env.agent_store;
    so.numWorkers = env.world_size;
    so.waitWorkers = true;
    so.timeout = options.timeout;
    impl->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    impl->master_addr = env.master_addr;
    impl->group = make_group(impl->store, env.rank, env.world_size, options, env.master_addr);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (const auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
    throw DistributedError(impl->where + ": rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port) +
                           " failed: " + msg + " -- are all " + std::to_string(env.world_size) +
                           " ranks started with the same MASTER_ADDR/MASTER_PORT, and is the port free?");
  }
  return std::shared_ptr<Comm>(new Comm(std::move(impl)));
}

std::shared_ptr<Comm> Comm::subgroup(const std::string& name, const std::vector<int>& global_ranks) {
  const int me = global_rank();
  const auto it = std::find(global_ranks.begin(), global_ranks.end(), me);
  if (it == global_ranks.end())
    throw std::invalid_argument("Comm::subgroup " + name + ": rank " + std::to_string(me) + " is not a member");
  auto impl = std::make_unique<Impl>();
  impl->options = impl_->options;
  impl->global_ranks = global_ranks;
  impl->rank = static_cast<int>(it - global_ranks.begin());
  impl->where = impl_->where + " (group " + name + ")";
  impl->store = c10::make_intrusive<c10d::PrefixStore>("memopt/" + name, impl_->store);
  impl->master_addr = impl_->master_addr;
  impl->group = make_group(impl->store, impl->rank, static_cast<int>(global_ranks.size()), impl_->options,
                           impl_->master_addr);
  return std::shared_ptr<Comm>(new Comm(std::move(impl)));
}

int Comm::rank() const { return impl_->rank; }
int Comm::size() const { return static_cast<int>(impl_->global_ranks.size()); }
int Comm::global_rank() const { return impl_->global_ranks[impl_->rank]; }

void Comm::all_reduce_sum(at::Tensor& t) {
  std::vector<at::Tensor> v{t};
  impl_->run("all_reduce", [&] { return impl_->group->allreduce(v); });
}

void Comm::reduce_scatter_sum(at::Tensor& out, const at::Tensor& in) {
  at::Tensor input = in;
  impl_->run("reduce_scatter", [&] { return impl_->group->_reduce_scatter_base(out, input); });
}

void Comm::all_gather(at::Tensor& out, const at::Tensor& in) {
  at::Tensor input = in;
  impl_->run("all_gather", [&] { return impl_->group->_allgather_base(out, input); });
}

void Comm::send(const at::Tensor& t, int dst, int tag) {
  std::vector<at::Tensor> v{t};
  impl_->run("send", [&] { return impl_->group->send(v, dst, tag); });
}

void Comm::recv(at::Tensor& t, int src, int tag) {
  std::vector<at::Tensor> v{t};
  impl_->run("recv", [&] { return impl_->group->recv(v, src, tag); });
}

void Comm::isend(const at::Tensor& t, int dst, int tag) {
  std::vector<at::Tensor> v{t};
  // Sends the peer has taken free their buffers now rather than at wait_sends.
  auto& pending = impl_->pending;
  pending.erase(std::remove_if(pending.begin(), pending.end(), [](const auto& w) { return w.first->isCompleted(); }),
                pending.end());
  try {
    impl_->pending.emplace_back(impl_->group->send(v, dst, tag), t);
  } catch (const std::exception& e) {
    throw DistributedError(impl_->where + ": send failed: " + std::string(e.what()).substr(0, 400));
  }
}

void Comm::wait_sends() {
  auto pending = std::move(impl_->pending);
  impl_->pending.clear();
  for (auto& [work, tensor] : pending) impl_->run("send", [&] { return work; });
}

void Comm::barrier() {
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

}  // namespace memopt::distributed

// comm.h: the process groups memopt's engines talk through -- PyTorch's c10d with
// its Gloo backend (TCPStore rendezvous at MASTER_ADDR:MASTER_PORT), never a
// transport of our own. The c10d and Gloo headers stay inside comm.cpp: they are
// heavy, and a CUDA build would add NCCL there, behind this same interface.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distributed/launch_env.h"

namespace memopt::distributed {

// A collective or point-to-point op failed or timed out: a peer died, hung, or ran
// a different program. what() names this rank, the op and what Gloo said.
struct DistributedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CommOptions {
  // How long any op (and the rendezvous) may wait for the other ranks before it
  // fails with DistributedError: the bound on a hang.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class Comm {
 public:
  // Rendezvous of every rank of `env` (rank 0 hosts the TCPStore) into one group.
  // Sets SIGPIPE to ignored unless the program handles it (Note [A dead peer is
  // an error, not a signal] in comm.cpp): a dead peer then fails an op instead of
  // ending this process.
  static std::shared_ptr<Comm> connect(const LaunchEnv& env, const CommOptions& options = {});
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // The group of `global_ranks` (ascending, this process among them) on the same
  // store; `name` must be the same on every member and unique per group.
  std::shared_ptr<Comm> subgroup(const std::string& name, const std::vector<int>& global_ranks);

  int rank() const;  // in this group
  int size() const;
  int global_rank() const;

  // Blocking, contiguous float tensors. `out` of reduce_scatter has in.numel()/size()
  // elements; `out` of all_gather has size() * in.numel().
  void all_reduce_sum(at::Tensor& t);
  void reduce_scatter_sum(at::Tensor& out, const at::Tensor& in);
  void all_gather(at::Tensor& out, const at::Tensor& in);
  void send(const at::Tensor& t, int dst, int tag);  // group ranks
  // A send that completes in the background (kept alive here until wait_sends):
  // 1F1B's ranks send both ways at once, and two blocking sends would deadlock.
  void isend(const at::Tensor& t, int dst, int tag);
  void wait_sends();
  void recv(at::Tensor& t, int src, int tag);
  void barrier();

 private:
  struct Impl;
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memopt::distributed

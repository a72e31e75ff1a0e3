// launch_env.h: where a process sits in a distributed job, read from the variables
// torchrun (and torch.distributed.launch, and any launcher that mimics them) sets:
// MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK. Plain C++.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace memopt::distributed {

struct LaunchEnv {
  std::string master_addr;
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 joins it instead of hosting one.
  bool agent_store = false;
};

// Reads the variables through `get` (std::getenv by default; tests pass a map).
// Throws std::invalid_argument naming the variable, its value and the fix: a
// missing one, a non-integer, a port outside 1..65535, RANK outside [0, WORLD_SIZE).
// LOCAL_RANK defaults to RANK when absent (plain multi-process launches).
using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;
LaunchEnv launch_env_from(const GetEnv& get);
LaunchEnv launch_env();

}  // namespace memopt::distributed

// launch_env.cpp: the torchrun variables, validated at the border.
#include "distributed/launch_env.h"

#include <cstdlib>
#include <stdexcept>

namespace memopt::distributed {
namespace {

constexpr const char* kHow =
    "; start memopt under a launcher (torchrun --nproc-per-node N $(which memopt) train ...) or set "
    "MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK yourself (README: Distributed training)";

std::string need(const GetEnv& get, const std::string& name) {
  std::optional<std::string> v = get(name);
  if (!v || v->empty()) throw std::invalid_argument("environment variable " + name + " is not set" + kHow);
  return *v;
}

int integer(const std::string& name, const std::string& text, long lo, long hi) {
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || used == 0)
    throw std::invalid_argument("environment variable " + name + "='" + text + "' is not an integer" + kHow);
  if (v < lo || v > hi)
    throw std::invalid_argument("environment variable " + name + "=" + text + " is outside [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]" + kHow);
  return static_cast<int>(v);
}

}  // namespace

LaunchEnv launch_env_from(const GetEnv& get) {
  LaunchEnv e;
  e.master_addr = need(get, "MASTER_ADDR");
  e.master_port = integer("MASTER_PORT", need(get, "MASTER_PORT"), 1, 65535);
  e.world_size = integer("WORLD_SIZE", need(get, "WORLD_SIZE"), 1, 1 << 20);
  e.rank = integer("RANK", need(get, "RANK"), 0, e.world_size - 1);
  const std::optional<std::string> local = get("LOCAL_RANK");
  e.local_rank = local && !local->empty() ? integer("LOCAL_RANK", *local, 0, e.world_size - 1) : e.rank;
  const std::optional<std::string> agent = get("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  return e;
}

LaunchEnv launch_env() {
  return launch_env_from([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace memopt::distributed

// host.cpp: reads /proc/cpuinfo once per call; nothing is cached.
#include "common/host.h"

#include <fstream>
#include <thread>

namespace memopt::common {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    return name.empty() ? "unknown CPU" : name;
  }
  return "unknown CPU";
}

int hardware_threads() { return static_cast<int>(std::thread::hardware_concurrency()); }

}  // namespace memopt::common

// host.h: what the machine running memopt is -- its CPU's model name and how many
// hardware threads it has -- for the "device" of a CPU profile and a report's
// "measured on" line.
#pragma once

#include <string>

namespace memopt::common {

// The first "model name" of /proc/cpuinfo, or "unknown CPU" where there is none.
std::string cpu_model_name();
// std::thread::hardware_concurrency(): logical CPUs, 0 when unknown.
int hardware_threads();

}  // namespace memopt::common

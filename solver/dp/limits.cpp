// limits.cpp: Note [Largest problem] in limits.h.
#include "solver/dp/limits.h"

#include "solver/dp/offload.h"

namespace memopt::solver {

int64_t max_recompute_table_slots(const Chain& chain) {
  const int64_t L = chain.length();
  const int64_t pairs = (L + 1) * (L + 2) / 2;
  return kMaxTableBytes / (pairs * 4) - 1;
}

int64_t max_offload_dp_slots(const Chain& chain) {
  return kMaxTableBytes / offload_dp_bytes(chain.length(), 0) - 1;
}

}  // namespace memopt::solver

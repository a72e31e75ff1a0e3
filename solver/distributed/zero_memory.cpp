// zero_memory.cpp: Note [ZeRO buckets] in numbers.
#include "solver/distributed/zero_memory.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace memopt::solver {

ZeroBuckets zero_buckets(const Chain& chain, const std::string& source, int64_t bytes_per_element) {
  ZeroBuckets z;
  for (int i = 0; i < chain.length(); ++i) {
    const Stage& s = chain.stages[i];
    if (!s.param_bytes)
      throw std::invalid_argument(source + ": /stages/" + std::to_string(i) +
                                  "/param_bytes: missing; ZeRO needs each stage's parameter bytes. Regenerate the "
                                  "profile with `memopt profile ... --out P.json` (this memopt writes them)");
    if (*s.param_bytes % bytes_per_element != 0)
      throw std::invalid_argument(source + ": /stages/" + std::to_string(i) + "/param_bytes: " +
                                  std::to_string(*s.param_bytes) + " is not a whole number of fp32 elements");
    z.numel.push_back(*s.param_bytes / bytes_per_element);
    std::vector<int> reads;
    if (*s.param_bytes > 0) reads.push_back(i);
    for (const auto& [home, bytes] : s.param_reads)
      if (bytes > 0 && std::find(reads.begin(), reads.end(), home) == reads.end()) reads.push_back(home);
    z.reads.push_back(std::move(reads));
  }
  return z;
}

ZeroMemory zero_memory(const ZeroBuckets& z, int D, int K, int64_t e) {
  if (D < 1) throw std::invalid_argument("the world size must be at least 1 rank (got " + std::to_string(D) + ")");
  if (K < 0 || K > 3) throw std::invalid_argument("the ZeRO stage must be 0, 1, 2 or 3 (got " + std::to_string(K) + ")");
  const int L = static_cast<int>(z.numel.size());
  std::vector<int64_t> P(L), S(L);
  int64_t sum_P = 0, sum_S = 0, max_P = 0, max_S = 0;
  for (int b = 0; b < L; ++b) {
    P[b] = (z.numel[b] + D - 1) / D * D;
    S[b] = P[b] / D;
    sum_P += P[b];
    sum_S += S[b];
    max_P = std::max(max_P, P[b]);
    max_S = std::max(max_S, S[b]);
  }
  ZeroMemory m;
  m.world_size = D;
  m.zero_stage = K;
  m.param_bytes = e * (K == 3 ? sum_S : sum_P);
  m.grad_bytes = e * (K >= 2 ? sum_S : sum_P);
  m.optimizer_bytes = e * 2 * (K == 0 ? sum_P : sum_S);
  const auto gathered = [&](int i) {
    int64_t g = 0;
    if (K == 3)
      for (const int b : z.reads[i]) g += P[b];
    return g;
  };
  int64_t transient = e * (K == 0 ? max_P : max_S);  // the AdamW step's temporary
  for (int i = 0; i < L; ++i) transient = std::max(transient, e * gathered(i));
  if (K >= 2) {
    std::set<int> alive;  // buckets whose full gradients exist
    for (int i = L - 1; i >= 0; --i) {
      for (const int b : z.reads[i]) alive.insert(b);
      int64_t grads = 0;
      for (const int b : alive) grads += P[b];
      transient = std::max(transient, e * (gathered(i) + grads));
      if (alive.count(i)) {
        transient = std::max(transient, e * (grads + P[i] + S[i]));
        alive.erase(i);
      }
    }
  }
  m.transient_bytes = transient;
  return m;
}

}  // namespace memopt::solver

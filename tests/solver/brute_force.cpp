// brute_force.cpp: the exhaustive persistent-schedule enumerator of brute_force.h.
// Deliberately shares nothing with solver/chain/plan.cpp or solver/dp/rotor.cpp.
#include "tests/solver/brute_force.h"

#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "solver/chain/simulate.h"

namespace memopt::solver::testing {
namespace {

using OpList = std::vector<Op>;

class Enumerator {
 public:
  explicit Enumerator(int L) : L_(L) {}

  const std::vector<OpList>& sub(int s, int t) {
    const auto key = std::make_pair(s, t);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::vector<OpList> out;
    if (s == t) {
      if (s == L_) out.push_back({{OpKind::Loss, -1}});
      else out.push_back({{OpKind::FwdKeep, s}, {OpKind::Bwd, s}});
    } else {
      for (const OpList& inner : sub(s + 1, t)) {
        OpList ops{{OpKind::FwdKeep, s}};
        ops.insert(ops.end(), inner.begin(), inner.end());
        ops.push_back({OpKind::Bwd, s});
        out.push_back(std::move(ops));
      }
      for (int j = s + 1; j <= t; ++j) {
        OpList prefix{{OpKind::FwdCkpt, s}};
        for (int k = s + 1; k < j; ++k) prefix.push_back({OpKind::FwdDrop, k});
        // Copy the operands: sub() may grow memo_ and invalidate references into it.
        const std::vector<OpList> right = sub(j, t);
        const std::vector<OpList> left = sub(s, j - 1);
        for (const OpList& a : right) {
          for (const OpList& b : left) {
            OpList ops = prefix;
            ops.insert(ops.end(), a.begin(), a.end());
            ops.insert(ops.end(), b.begin(), b.end());
            out.push_back(std::move(ops));
          }
        }
      }
    }
    return memo_[key] = std::move(out);
  }

 private:
  int L_;
  std::map<std::pair<int, int>, std::vector<OpList>> memo_;
};

void random_sub(int L, int s, int t, std::mt19937_64& rng, OpList& ops) {
  if (s == t) {
    if (s == L) ops.push_back({OpKind::Loss, -1});
    else { ops.push_back({OpKind::FwdKeep, s}); ops.push_back({OpKind::Bwd, s}); }
    return;
  }
  // Branch 0 keeps s; branch j in (s, t] checkpoints s and restarts at j.
  const int branch = std::uniform_int_distribution<int>(s, t)(rng);
  if (branch == s) {
    ops.push_back({OpKind::FwdKeep, s});
    random_sub(L, s + 1, t, rng, ops);
    ops.push_back({OpKind::Bwd, s});
    return;
  }
  const int j = branch;
  ops.push_back({OpKind::FwdCkpt, s});
  for (int k = s + 1; k < j; ++k) ops.push_back({OpKind::FwdDrop, k});
  random_sub(L, j, t, rng, ops);
  random_sub(L, s, j - 1, rng, ops);
}

}  // namespace

std::vector<std::vector<Op>> all_persistent_schedules(int L) {
  Enumerator e(L);
  return e.sub(0, L);
}

std::vector<std::vector<Op>> persistent_schedules_of(int L, int s, int t) {
  Enumerator e(L);
  return e.sub(s, t);
}

int64_t num_persistent_schedules(int L) {
  std::vector<int64_t> n(L + 2, 0);
  n[1] = 1;
  for (int len = 2; len <= L + 1; ++len) {
    n[len] = n[len - 1];
    for (int k = 1; k < len; ++k) n[len] += n[len - k] * n[k];
  }
  return n[L + 1];
}

std::vector<Op> random_persistent_schedule(int L, std::mt19937_64& rng) {
  OpList ops;
  random_sub(L, 0, L, rng, ops);
  return ops;
}

std::vector<Evaluated> evaluate_all(const Chain& chain, const std::vector<std::vector<Op>>& schedules) {
  std::vector<Evaluated> out;
  out.reserve(schedules.size());
  for (size_t i = 0; i < schedules.size(); ++i) {
    const SimResult r = simulate_sequential(chain, schedules[i]);
    if (!r.valid)
      throw std::logic_error("brute force: persistent schedule " + std::to_string(i) + " is invalid: " + r.error);
    out.push_back({r.peak_bytes, r.time_ms, i});
  }
  return out;
}

std::optional<Evaluated> fastest_fitting(const std::vector<Evaluated>& evaluated, int64_t budget_bytes) {
  std::optional<Evaluated> best;
  for (const Evaluated& e : evaluated) {
    if (e.peak_bytes > budget_bytes) continue;
    if (!best || e.time_ms < best->time_ms) best = e;
  }
  return best;
}

}  // namespace memopt::solver::testing

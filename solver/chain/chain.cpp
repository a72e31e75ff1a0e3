// chain.cpp: the invariants of docs/formats.md, "The chain model", checked once for any Chain however it
// was made (read from a file, built by a profiler or a test), so that the simulators
// and the DPs can trust every number they are given.
#include "solver/chain/chain.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <algorithm>

namespace memopt::solver {
namespace {

// Note [Why totals are bounded]: every field may be a valid int64 or double on its
// own and still break the arithmetic downstream: the simulators add resident sizes
// in int64, and the DP scales its time bound by L+1 before taking a logarithm. No
// real device comes near 1 EiB of activations or a step of 1e15 ms (31,700 years),
// so anything above these limits is a unit mistake, and refusing it here keeps every
// later sum far from overflow.
constexpr int64_t kMaxTotalBytes = int64_t{1} << 60;
constexpr double kMaxTotalMs = 1e15;

std::string number_text(double v) {
  char buf[32];
  // The shortest form that reads back as v, so messages show what the user wrote.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

struct Checker {
  std::string error;
  int64_t total_bytes = 0;
  double total_ms = 0;

  bool ok() const { return error.empty(); }

  void bytes(const std::string& path, int64_t v) {
    if (!ok()) return;
    if (v < 0) {
      error = path + ": " + std::to_string(v) + " is negative, but sizes are byte counts (>= 0)";
    } else if (v > kMaxTotalBytes - total_bytes) {
      error = path + ": " + std::to_string(v) + " brings the chain's sizes above 2^60 bytes (1 EiB) in total, " +
              "beyond any device; a size is probably in the wrong unit";
    } else {
      total_bytes += v;
    }
  }

  void ms(const std::string& path, double v) {
    if (!ok()) return;
    if (!std::isfinite(v)) {
      error = path + ": " + number_text(v) + " is not a finite time";
    } else if (v < 0) {
      error = path + ": " + number_text(v) + " is negative, but times are durations in ms (>= 0)";
    } else if (v > kMaxTotalMs - total_ms) {
      error = path + ": " + number_text(v) + " brings the chain's times above 1e15 ms (31,700 years) in total; " +
              "a time is probably in the wrong unit";
    } else {
      total_ms += v;
    }
  }

  void bandwidth(const std::string& path, double v) {
    if (!ok()) return;
    if (!std::isfinite(v) || v <= 0)
      error = path + ": " + number_text(v) + " is not a positive finite bandwidth in bytes per second";
  }
};

}  // namespace

std::string validate(const Chain& chain) {
  if (chain.stages.empty()) return "/stages: the chain has no stages, but it needs at least one";
  Checker c;
  c.bytes("/input_bytes", chain.input_bytes);
  for (size_t i = 0; i < chain.stages.size() && c.ok(); ++i) {
    const Stage& s = chain.stages[i];
    const std::string p = "/stages/" + std::to_string(i) + "/";
    c.ms(p + "fwd_ms", s.fwd_ms);
    if (s.fwd_nograd_ms) c.ms(p + "fwd_nograd_ms", *s.fwd_nograd_ms);
    c.ms(p + "bwd_ms", s.bwd_ms);
    if (s.fwd_bwd_pair_ms) c.ms(p + "fwd_bwd_pair_ms", *s.fwd_bwd_pair_ms);
    c.bytes(p + "out_bytes", s.out_bytes);
    // Counted once more: the gradient d_{i+1} has the size of the output.
    c.bytes(p + "out_bytes", s.out_bytes);
    c.bytes(p + "saved_bytes", s.saved_bytes);
    c.bytes(p + "fwd_tmp_bytes", s.fwd_tmp_bytes);
    if (s.fwd_keep_tmp_bytes) c.bytes(p + "fwd_keep_tmp_bytes", *s.fwd_keep_tmp_bytes);
    if (c.ok() && s.carried_bytes < 0)
      c.error = p + "carried_bytes: " + std::to_string(s.carried_bytes) + " is negative, but it is a byte count (>= 0)";
    if (c.ok() && s.carried_bytes > std::min(s.out_bytes, chain.x(static_cast<int>(i))))
      c.error = p + "carried_bytes: " + std::to_string(s.carried_bytes) + " is more than the stage's output (" +
                std::to_string(s.out_bytes) + " bytes) or its input (" + std::to_string(chain.x(static_cast<int>(i))) +
                " bytes), but it is the part of the output that is the input's own tensors";
    // Note [A backward may peak below its gradient] in chain.h.
    if (c.ok() && s.bwd_tmp_bytes < 0) {
      const int64_t new_grad_bytes = chain.x(static_cast<int>(i)) - s.carried_bytes;
      if (s.bwd_tmp_bytes < -new_grad_bytes)
        c.error = p + "bwd_tmp_bytes: " + std::to_string(s.bwd_tmp_bytes) + " is below -" + std::to_string(new_grad_bytes) +
                  " (minus the new part of the input's gradient, x_i - carried_bytes), but a backward never peaks "
                  "below what was resident when it started";
    } else {
      c.bytes(p + "bwd_tmp_bytes", s.bwd_tmp_bytes);
    }
    for (size_t k = 0; k < s.param_reads.size() && c.ok(); ++k)
      if (s.param_reads[k].first < 0 || s.param_reads[k].first >= static_cast<int>(i))
        c.error = p + "param_reads/" + std::to_string(k) + "/0: home stage " + std::to_string(s.param_reads[k].first) +
                  " is not an earlier stage; a stage reads its own parameters through param_bytes";
    if (c.ok() && s.saved_bytes < s.out_bytes)
      c.error = p + "saved_bytes: " + std::to_string(s.saved_bytes) + " is less than out_bytes (" +
                std::to_string(s.out_bytes) + "), but saved_bytes includes the output";
  }
  c.ms("/loss/bwd_ms", chain.loss.bwd_ms);
  c.bytes("/loss/bwd_tmp_bytes", chain.loss.bwd_tmp_bytes);
  if (chain.link) {
    c.bandwidth("/link/d2h_bytes_per_s", chain.link->d2h_bytes_per_s);
    c.bandwidth("/link/h2d_bytes_per_s", chain.link->h2d_bytes_per_s);
  }
  return c.error;
}

void drop_pair_times(Chain& chain) {
  for (Stage& s : chain.stages) s.fwd_bwd_pair_ms.reset();
}

int64_t Chain::shared(int j, int k) const {
  if (j > k) std::swap(j, k);
  if (j == k) return x(k);
  int64_t run = x(j);
  for (int b = j + 1; b <= k && run > 0; ++b) run = std::min(run, carried(b));
  return run;
}

int Chain::first_holder_of_ending_carry(int k) const {
  const int64_t passed_on = carried(k + 1);
  int s = k;
  for (int64_t run = x(k); s > 0 && std::min(run, carried(s)) > passed_on; --s) run = std::min(run, carried(s));
  return s;
}

const char* role_word(StageRole role) {
  for (const StageRoleInfo& info : kStageRoles)
    if (info.value == role) return info.word;
  return "?";
}

std::optional<StageRole> role_from_word(std::string_view word) {
  for (const StageRoleInfo& info : kStageRoles)
    if (word == info.word) return info.value;
  return std::nullopt;
}

bool Chain::has_role(StageRole role) const {
  for (const Stage& s : stages)
    if (s.role == role) return true;
  return false;
}

bool Chain::carries() const {
  for (const Stage& s : stages)
    if (s.carried_bytes > 0) return true;
  return false;
}

double sum_fwd_bwd_ms(const Chain& chain) {
  double total_ms = chain.loss.bwd_ms;
  for (const Stage& s : chain.stages) total_ms += s.fwd_ms + s.bwd_ms;
  return total_ms;
}

}  // namespace memopt::solver

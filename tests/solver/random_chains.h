// random_chains.h: chain generators shared by the solver tests and the solver benchmark --
// homogeneous chains for the closed forms of docs/formats.md, "Baselines and the solver front
// door", random chains for property and
// brute-force tests, a GPT-2-shaped chain, and the "discretised" view of a chain (sizes
// in slots, times in quantum units) that lets tests compare with the DP exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "solver/chain/chain.h"
#include "solver/dp/rotor.h"

namespace memopt::solver::testing {

// "s" + std::to_string(i), written so that GCC 12 does not warn (-Wrestrict false positive).
inline std::string numbered(const char* prefix, int i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

// The homogeneous chain of docs/formats.md, "Baselines and the solver front door": x_i = c (input
// included), x̄_i = cbar, no tmp,
// ub_L = 0.
inline Chain homogeneous_chain(int L, double uf_ms, double ub_ms, int64_t c_bytes, int64_t cbar_bytes) {
  Chain chain;
  chain.input_bytes = c_bytes;
  for (int i = 0; i < L; ++i) {
    Stage s;
    s.name = numbered("h", i);
    s.fwd_ms = uf_ms;
    s.bwd_ms = ub_ms;
    s.out_bytes = c_bytes;
    s.saved_bytes = cbar_bytes;
    chain.stages.push_back(s);
  }
  return chain;
}

struct RandomChainOptions {
  int length = 4;
  // Sizes are multiples of unit_bytes in [0, max_units] (x̄ in [x, x + max_units]).
  int64_t unit_bytes = 1;
  int64_t max_units = 8;
  double zero_probability = 0.15;        // a size (or a tmp) is exactly 0
  double large_tmp_probability = 0.15;   // a tmp is several times the largest tensor
  int64_t large_tmp_units = 40;
  // Times: integers in [0, max_ms] when integer_ms, else uniform reals in [0.01, max_ms].
  bool integer_ms = true;
  double max_ms = 9;
  // Give some stages a separate fwd_keep transient (memopt's extension, docs/formats.md,
  // "Extensions beyond the original contract").
  bool keep_tmp = true;
  // The chance that a stage passes part of its input through to its output (Note
  // [Carried bytes] in solver/chain/chain.h): c_{i+1}, a multiple of unit_bytes, up to the
  // smaller of x_i and x_{i+1}. Drawn after everything else, so that 0 leaves the
  // random sequence of older tests as it was.
  double carry_probability = 0;
  // The chance that a stage's backward peaks below "resident with d_i" (Note [A
  // backward may peak below its gradient] in solver/chain/chain.h): btmp_i, a multiple of
  // unit_bytes, anywhere from 0 down to -(x_i - c_{i+1}). Drawn last, for the same
  // reason.
  double below_gradient_probability = 0;
  // The chance that a stage has a back-to-back time (give_pair_times). Drawn last, for
  // the same reason.
  double pair_time_probability = 0;
};

// Gives each stage, with the given chance, a back-to-back time (Note [A stage run back to
// back] in solver/chain/chain.h): fwd_ms + bwd_ms times a factor in [0.5, 1.2), floored
// when integer_ms.
inline void give_pair_times(Chain& chain, std::mt19937_64& rng, double probability, bool integer_ms) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (Stage& s : chain.stages) {
    if (u01(rng) >= probability) continue;
    const double v = (s.fwd_ms + s.bwd_ms) * (0.5 + 0.7 * u01(rng));
    s.fwd_bwd_pair_ms = integer_ms ? std::floor(v) : v;
  }
}

// Random chains with every knob that matters to the DP: zero-size tensors, zero
// tmp, large forward and backward temporaries, x̄ anywhere from x to x + max.
inline Chain random_chain(std::mt19937_64& rng, const RandomChainOptions& o) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::uniform_int_distribution<int64_t> units(1, std::max<int64_t>(1, o.max_units));
  std::uniform_int_distribution<int64_t> large(o.large_tmp_units / 2, std::max<int64_t>(1, o.large_tmp_units));
  const auto size = [&] { return u01(rng) < o.zero_probability ? 0 : units(rng) * o.unit_bytes; };
  const auto tmp = [&] {
    const double r = u01(rng);
    if (r < o.large_tmp_probability) return large(rng) * o.unit_bytes;
    if (r < o.large_tmp_probability + 0.35) return int64_t{0};
    return size();
  };
  const auto time = [&] {
    if (o.integer_ms) return static_cast<double>(std::uniform_int_distribution<int>(0, static_cast<int>(o.max_ms))(rng));
    return 0.01 + u01(rng) * (o.max_ms - 0.01);
  };
  Chain chain;
  chain.input_bytes = size();
  for (int i = 0; i < o.length; ++i) {
    Stage s;
    s.name = numbered("s", i);
    s.fwd_ms = time();
    s.bwd_ms = time();
    s.out_bytes = size();
    s.saved_bytes = s.out_bytes + (u01(rng) < 0.3 ? 0 : size());
    s.fwd_tmp_bytes = tmp();
    s.bwd_tmp_bytes = tmp();
    // Half the stages give fwd_keep its own transient (Note [Two forward temporaries]).
    if (o.keep_tmp && u01(rng) < 0.5) s.fwd_keep_tmp_bytes = tmp();
    // ... and half a faster no-grad forward, never slower than fwd_ms as in practice.
    if (o.keep_tmp && u01(rng) < 0.5) s.fwd_nograd_ms = std::floor(s.fwd_ms * u01(rng));
    chain.stages.push_back(s);
  }
  chain.loss.bwd_ms = u01(rng) < 0.5 ? 0.0 : time();
  chain.loss.bwd_tmp_bytes = tmp();
  // Up to `most` units: all of them half the time, else a uniform count from 1.
  const auto all_or_some = [&](int64_t most) {
    return u01(rng) < 0.5 ? most : std::uniform_int_distribution<int64_t>(1, most)(rng);
  };
  if (o.carry_probability > 0) {
    for (int i = 0; i < o.length; ++i) {
      const int64_t most_units = std::min(chain.x(i), chain.x(i + 1)) / o.unit_bytes;
      if (most_units == 0 || u01(rng) >= o.carry_probability) continue;
      // Half of them carry the whole input, as a stage inside a residual run does.
      chain.stages[static_cast<size_t>(i)].carried_bytes = all_or_some(most_units) * o.unit_bytes;
    }
  }
  if (o.below_gradient_probability > 0) {
    for (int i = 0; i < o.length; ++i) {
      const int64_t new_grad_units = (chain.x(i) - chain.carried(i + 1)) / o.unit_bytes;
      if (new_grad_units == 0 || u01(rng) >= o.below_gradient_probability) continue;
      // Half of them all the way down, as a backward that frees what it saved first.
      chain.stages[static_cast<size_t>(i)].bwd_tmp_bytes = -all_or_some(new_grad_units) * o.unit_bytes;
    }
  }
  if (o.pair_time_probability > 0) give_pair_times(chain, rng, o.pair_time_probability, o.integer_ms);
  return chain;
}

// Integer sizes and times, and links of 500, 1000 or 2000 B/s, so that every copy
// takes a multiple of 0.5 ms: the simulator's doubles, the DP's quantum units and
// the brute force's sums are all exact, and exact equality is the right test.
inline Chain small_chain(std::mt19937_64& rng, int L, double below_gradient_probability = 0) {
  RandomChainOptions o;
  o.length = L;
  o.max_units = 6;
  o.large_tmp_units = 20;
  o.max_ms = 6;
  o.below_gradient_probability = below_gradient_probability;
  Chain chain = random_chain(rng, o);
  const double rates[] = {500.0, 1000.0, 2000.0};
  std::uniform_int_distribution<int> pick(0, 2);
  chain.link = Link{rates[pick(rng)], rates[pick(rng)]};
  return chain;
}

// A random chain of `length` stages, with carried bytes in every third trial and one
// of three link rates each way, chosen by the trial number.
inline Chain linked_chain(std::mt19937_64& rng, int trial, int length) {
  RandomChainOptions o;
  o.length = length;
  o.max_units = 8;
  o.large_tmp_units = 24;
  o.carry_probability = trial % 3 == 0 ? 0.3 : 0.0;
  Chain chain = random_chain(rng, o);
  const double rates[] = {300.0, 1000.0, 4000.0};
  chain.link = Link{rates[trial % 3], rates[(trial / 3) % 3]};
  return chain;
}

// Arbitrary byte sizes (not multiples of anything) and real times.
inline Chain random_byte_chain(std::mt19937_64& rng, int L, int64_t max_bytes, double zero_probability = 0.1) {
  RandomChainOptions o;
  o.length = L;
  o.unit_bytes = 1;
  o.max_units = max_bytes;
  o.zero_probability = zero_probability;
  o.large_tmp_units = 4 * max_bytes;
  o.integer_ms = false;
  o.max_ms = 10;
  return random_chain(rng, o);
}

// A GPT-2-shaped chain of L >= 3 stages: a small embedding stage, L-2 transformer
// blocks that save about 10x their output (attention and MLP internals), and a final
// ln_f + lm_head + cross-entropy stage that saves the logits (the largest tensor)
// and outputs the scalar loss. Sizes are those of B=8, T=1024, C=768, V=50257, fp32.
inline Chain gpt2_like_chain(int L) {
  const int64_t B = 8, T = 1024, C = 768, V = 50257, f32 = 4;
  const int64_t act = B * T * C * f32;     // one residual-stream activation
  const int64_t logits = B * T * V * f32;
  Chain chain;
  chain.input_bytes = B * T * 8;            // int64 token ids
  chain.stages.push_back({"embed", 1.9, 3.1, act, act, 0, act});
  for (int i = 0; i + 2 < L; ++i)
    chain.stages.push_back({numbered("block", i), 38.0, 77.0, act, 10 * act + act / 3, 4 * act, 6 * act});
  chain.stages.push_back({"head", 95.0, 190.0, f32, logits + act, logits, 2 * logits});
  chain.loss = {0.0, 0};
  return chain;
}

// A chain shaped like a measured sublayer profile where blocks dominate memory: an
// embedding, then attention and MLP halves taking turns (GPT-2 small's proportions at
// B = 8, T = 1024), every time and byte drawn within +-10% of its half's, and a head
// whose loss is chunked (it saves about one activation, not B x T x V logits). L
// counts every stage; the variation is seeded, so a benchmark row is one chain.
inline Chain block_dominated_chain(int L, uint64_t seed = 7) {
  const int64_t B = 8, T = 1024, C = 768, f32 = 4;
  const int64_t act = B * T * C * f32;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> wobble(0.9, 1.1);
  const auto ms = [&](double v) { return v * wobble(rng); };
  const auto bytes = [&](int64_t v) { return static_cast<int64_t>(static_cast<double>(v) * wobble(rng)); };
  Chain chain;
  chain.input_bytes = B * T * 8;
  chain.stages.push_back({"embed", 1.9, 3.1, act, act, 0, act});
  for (int i = 0; i + 2 < L; ++i) {
    if (i % 2 == 0)  // attention: q, k, v, probabilities and the projection's input
      chain.stages.push_back({numbered("attn", i / 2), ms(17.0), ms(35.0), act, bytes(6 * act + act / 3),
                              bytes(3 * act), bytes(4 * act)});
    else  // MLP: the 4C hidden before and after GELU
      chain.stages.push_back({numbered("mlp", i / 2), ms(21.0), ms(42.0), act, bytes(9 * act), bytes(4 * act),
                              bytes(5 * act)});
  }
  chain.stages.push_back({"head", 9.5, 19.0, f32, act + act / 8, act / 4, act / 2});
  chain.loss = {0.0, 0};
  return chain;
}

// The chain as the DP sees it for (budget_bytes, slots): every size in slots of
// budget/slots, rounded up (computed here, independently of bytes_to_slots), every
// time in units of time_quantum_for(chain), rounded to nearest. Simulating ops on it
// gives peaks in slots and times in quantum units, exactly (small integers in double).
inline int64_t ceil_slots(int64_t bytes, int64_t budget_bytes, int slots) {
  if (bytes <= 0) return 0;
  const __int128 num = static_cast<__int128>(bytes) * slots;
  return static_cast<int64_t>(num / budget_bytes + (num % budget_bytes != 0 ? 1 : 0));
}

inline Chain discretised(const Chain& chain, int64_t budget_bytes, int slots) {
  const TimeQuantum q = time_quantum_for(chain);
  const auto sl = [&](int64_t b) { return ceil_slots(b, budget_bytes, slots); };
  const auto un = [&](double ms) { return static_cast<double>(std::llround(ms / q.unit_ms)); };
  Chain d;
  d.input_bytes = sl(chain.input_bytes);
  for (const Stage& s : chain.stages)
    d.stages.push_back({s.name, un(s.fwd_ms), un(s.bwd_ms), sl(s.out_bytes), sl(s.saved_bytes),
                        sl(s.fwd_tmp_bytes), sl(s.bwd_tmp_bytes),
                        s.fwd_keep_tmp_bytes ? std::optional<int64_t>(sl(*s.fwd_keep_tmp_bytes)) : std::nullopt,
                        s.fwd_nograd_ms ? std::optional<double>(un(*s.fwd_nograd_ms)) : std::nullopt,
                        s.fwd_bwd_pair_ms ? std::optional<double>(un(*s.fwd_bwd_pair_ms)) : std::nullopt});
  d.loss = {un(chain.loss.bwd_ms), sl(chain.loss.bwd_tmp_bytes)};
  return d;
}

}  // namespace memopt::solver::testing

// small_config.h: the small GPT-2 the arithmetic tests use -- sizes where no two
// byte terms coincide, so a wrong term cannot hide behind another.
#pragma once

#include "gpt2/config.h"

namespace memopt::gpt2::testing {

inline Gpt2Config small_config(Attention attention, Granularity granularity, double dropout) {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_embd = 64;
  c.n_head = 4;
  c.vocab_size = 300;
  c.n_positions = 96;
  c.attention = attention;
  c.granularity = granularity;
  c.set_dropout(dropout);
  return c;
}
inline const Gpt2Workload kSmallWorkload{3, 96};  // N = 288, B H T^2 = 110592

}  // namespace memopt::gpt2::testing

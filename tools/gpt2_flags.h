// gpt2_flags.h: the GPT-2 flags `memopt profile` and `memopt estimate` share, parsed
// into gpt2::Gpt2Choices (gpt2/spec_choices.h builds the spec), and the flag by which
// an error names each choice.
#pragma once

#include <CLI/CLI.hpp>

#include "gpt2/spec_choices.h"

namespace memopt::tools {

// --model, --preset, --batch, --seq, --granularity, --attention, --loss, --kernels,
// --dropout; the current values of `choices` are the defaults shown.
void add_gpt2_flags(CLI::App* cmd, gpt2::Gpt2Choices& choices);
// --n-layer, --n-embd, --n-head, --vocab, --n-positions.
void add_gpt2_model_flags(CLI::App* cmd, gpt2::Gpt2Choices& choices);

// "--seq" for gpt2::Choice::Seq: pass to gpt2::build_gpt2_spec.
const char* gpt2_flag(gpt2::Choice choice);

}  // namespace memopt::tools

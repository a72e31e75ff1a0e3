// spec_choices.h: from what a user chose -- a preset (or a configuration read from a
// file), dimension overrides, the workload, the kernel words -- to one validated
// Gpt2Spec. `memopt profile` and `memopt estimate` both build their GPT-2 here; each
// error names the choice to fix, in the caller's words for it (the CLI's flags).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gpt2/config.h"

namespace memopt::gpt2 {

// The choices an error can name, one table: the enum and the word this layer uses
// for it (the profile's "model" keys).
enum class Choice { Model, Preset, NLayer, NEmbd, NHead, Vocab, NPositions, Batch, Seq, Dropout, Granularity, Attention, Kernels, Loss };
struct ChoiceInfo { Choice value; const char* word; };
inline constexpr ChoiceInfo kChoices[] = {
    {Choice::Model, "model"},           {Choice::Preset, "preset"},
    {Choice::NLayer, "n_layer"},        {Choice::NEmbd, "n_embd"},
    {Choice::NHead, "n_head"},          {Choice::Vocab, "vocab"},
    {Choice::NPositions, "n_positions"}, {Choice::Batch, "batch"},
    {Choice::Seq, "seq_len"},           {Choice::Dropout, "dropout"},
    {Choice::Granularity, "granularity"}, {Choice::Attention, "attention"},
    {Choice::Kernels, "kernels"},       {Choice::Loss, "loss"},
};
const char* choice_word(Choice choice);
// How errors name a choice: choice_word, or the caller's own names (the CLI's flags).
using ChoiceName = const char* (*)(Choice);

// A configuration read from a file -- a Hugging Face config.json -- used instead of
// the preset's. It fixes the model's dimensions: an override may only repeat them.
struct BaseConfig {
  Gpt2Config config;
  std::string source;  // "DIR/config.json", named in errors
  std::string hf_dir;  // the weights' folder; the spec records it absolute (the runtime may run elsewhere)
};

// Unset optionals keep the preset's (or the base config's) value.
struct Gpt2Choices {
  std::string model = "gpt2";
  std::string preset = "tiny";     // the dimensions, and the workload (B, T) unless overridden
  std::optional<BaseConfig> base;  // the dimensions instead of the preset's
  std::optional<int64_t> n_layer, n_embd, n_head, vocab, n_positions;
  std::optional<int64_t> batch, seq;
  std::optional<double> dropout;   // everywhere GPT-2 has dropout; unset: the base's, or GPT-2's 0.1
  std::string granularity = "block", attention = "explicit", kernels = "aten", loss = "aten";
  uint64_t seed = 1234;
  // Note [Growing the position table]
  bool grow_positions = false;
};

// Throws std::invalid_argument naming the choice (by `name`) and the fix. The spec's
// preset is the chosen one only when the dimensions are that preset's.
Gpt2Spec build_gpt2_spec(const Gpt2Choices& choices, ChoiceName name = choice_word);

}  // namespace memopt::gpt2

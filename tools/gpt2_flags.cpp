// gpt2_flags.cpp: the shared GPT-2 flags and the one table of their names.
#include "tools/gpt2_flags.h"

#include <string>

namespace memopt::tools {

namespace {

using gpt2::Choice;

struct ChoiceFlag { Choice choice; const char* flag; };
constexpr ChoiceFlag kFlags[] = {
    {Choice::Model, "--model"},     {Choice::Preset, "--preset"},     {Choice::NLayer, "--n-layer"},
    {Choice::NEmbd, "--n-embd"},    {Choice::NHead, "--n-head"},      {Choice::Vocab, "--vocab"},
    {Choice::NPositions, "--n-positions"}, {Choice::Batch, "--batch"}, {Choice::Seq, "--seq"},
    {Choice::Dropout, "--dropout"}, {Choice::Granularity, "--granularity"}, {Choice::Attention, "--attention"},
    {Choice::Kernels, "--kernels"}, {Choice::Loss, "--loss"},
};

// An option that sets `target` only when given, so that the preset supplies the rest.
template <typename T>
void add_optional(CLI::App* cmd, Choice choice, std::optional<T>& target, const std::string& help) {
  cmd->add_option_function<T>(gpt2_flag(choice), [&target](const T& v) { target = v; }, help);
}

}  // namespace

const char* gpt2_flag(Choice choice) {
  for (const ChoiceFlag& row : kFlags)
    if (row.choice == choice) return row.flag;
  return gpt2::choice_word(choice);
}

void add_gpt2_flags(CLI::App* cmd, gpt2::Gpt2Choices& c) {
  cmd->add_option(gpt2_flag(Choice::Model), c.model, "model family (gpt2)")->capture_default_str();
  cmd->add_option(gpt2_flag(Choice::Preset), c.preset, std::string("model size: ") + gpt2::kPresetNames)
      ->capture_default_str();
  add_optional(cmd, Choice::Batch, c.batch, "sequences per batch B (preset default)");
  add_optional(cmd, Choice::Seq, c.seq, "tokens per sequence T (preset default)");
  cmd->add_option(gpt2_flag(Choice::Granularity), c.granularity,
                  "block|sublayer|op: a stage per block, per half-block, or per operator")
      ->capture_default_str();
  cmd->add_option(gpt2_flag(Choice::Attention), c.attention,
                  "explicit|sdpa: materialized T x T scores or the fused kernel")
      ->capture_default_str();
  cmd->add_option(gpt2_flag(Choice::Loss), c.loss,
                  "aten|chunked: the head's loss as ATen's linear + log_softmax + nll_loss (N x V logits), or "
                  "memopt's chunked linear cross-entropy with wte's gradients added in place")
      ->capture_default_str();
  cmd->add_option(gpt2_flag(Choice::Kernels), c.kernels,
                  "memopt|aten: memopt's mask-free Philox dropout and fused bias+GELU, or ATen's "
                  "(memopt run follows the profile's choice)")
      ->capture_default_str();
  add_optional(cmd, Choice::Dropout, c.dropout,
               "dropout probability everywhere GPT-2 has it (default: GPT-2's 0.1, or a loaded config's)");
}

void add_gpt2_model_flags(CLI::App* cmd, gpt2::Gpt2Choices& c) {
  add_optional(cmd, Choice::NLayer, c.n_layer, "transformer blocks (overrides the preset)");
  add_optional(cmd, Choice::NEmbd, c.n_embd, "width C (overrides the preset)");
  add_optional(cmd, Choice::NHead, c.n_head, "attention heads H; must divide C");
  add_optional(cmd, Choice::Vocab, c.vocab, "vocabulary size V");
  add_optional(cmd, Choice::NPositions, c.n_positions, "position table size (>= --seq)");
}

}  // namespace memopt::tools

// spec_choices.cpp: the one builder of a GPT-2 spec from a user's choices.
#include "gpt2/spec_choices.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace memopt::gpt2 {

const char* choice_word(Choice choice) {
  for (const auto& row : kChoices)
    if (row.value == choice) return row.word;
  return "?";
}

// Note [Growing the position table]
// GPT-2's position table holds n_positions tokens (1024 for the published sizes). A
// measured profile must be of the model the user named, so a longer sequence is an
// error there, with the fix. A modeled estimate (`memopt estimate --seq 2048`) asks
// what a longer sequence would cost, so it grows the table to fit and keeps the
// preset's name: the model is that preset with a longer table.
Gpt2Spec build_gpt2_spec(const Gpt2Choices& ch, ChoiceName name) {
  auto fail = [&](Choice c, const std::string& what) { throw std::invalid_argument(name(c) + what); };
  if (ch.model != "gpt2") fail(Choice::Model, ": '" + ch.model + "' is not supported; use gpt2");
  const std::optional<Gpt2Preset> preset = gpt2_preset(ch.preset);
  if (!preset) fail(Choice::Preset, ": unknown preset '" + ch.preset + "'; choose one of " + kPresetNames);

  Gpt2Spec spec;
  spec.preset = ch.preset;
  spec.seed = ch.seed;
  spec.workload = preset->workload;
  Gpt2Config& c = spec.config;
  struct Dim { Choice choice; const std::optional<int64_t>& value; int64_t Gpt2Config::*field; };
  const Dim dims[] = {{Choice::NLayer, ch.n_layer, &Gpt2Config::n_layer},
                      {Choice::NEmbd, ch.n_embd, &Gpt2Config::n_embd},
                      {Choice::NHead, ch.n_head, &Gpt2Config::n_head},
                      {Choice::Vocab, ch.vocab, &Gpt2Config::vocab_size},
                      {Choice::NPositions, ch.n_positions, &Gpt2Config::n_positions}};
  if (ch.base) {
    c = ch.base->config;
    spec.preset.clear();
    if (!ch.base->hf_dir.empty()) spec.hf_dir = std::filesystem::absolute(ch.base->hf_dir).string();
    for (const Dim& d : dims)
      if (d.value && *d.value != c.*d.field)
        fail(d.choice, " " + std::to_string(*d.value) + " conflicts with " + ch.base->source + ", which says " +
                           std::to_string(c.*d.field) + "; drop it (" + ch.base->source +
                           " fixes the model's dimensions)");
  } else {
    c = preset->config;
    for (const Dim& d : dims)
      if (d.value) c.*d.field = *d.value;
    // A model whose dimensions differ from the preset's is not that preset: titles and
    // profiles must not call it so.
    for (const Dim& d : dims)
      if (c.*d.field != preset->config.*d.field) spec.preset.clear();
  }
  if (ch.dropout) c.set_dropout(*ch.dropout);
  if (ch.batch) spec.workload.batch = *ch.batch;
  if (ch.seq) spec.workload.seq_len = *ch.seq;
  // The preset's sequence is a default, not a choice: clip it to the base's table.
  if (ch.base && !ch.seq) spec.workload.seq_len = std::min(spec.workload.seq_len, c.n_positions);
  if (ch.grow_positions) c.n_positions = std::max(c.n_positions, spec.workload.seq_len);

  const auto g = granularity_from_word(ch.granularity);
  if (!g) fail(Choice::Granularity, ": '" + ch.granularity + "' is not " + words_of(kGranularities));
  c.granularity = *g;
  const auto attention = attention_from_word(ch.attention);
  if (!attention) fail(Choice::Attention, ": '" + ch.attention + "' is not " + words_of(kAttentions));
  c.attention = *attention;
  const auto kernels = kernels_from_word(ch.kernels);
  if (!kernels) fail(Choice::Kernels, ": '" + ch.kernels + "' is not " + words_of(kKernelChoices));
  c.kernels = *kernels;
  const auto loss = loss_from_word(ch.loss);
  if (!loss) fail(Choice::Loss, ": '" + ch.loss + "' is not " + words_of(kLosses));
  c.loss = *loss;

  if (spec.workload.seq_len > c.n_positions) {
    const std::string seq = std::to_string(spec.workload.seq_len);
    if (ch.base)
      fail(Choice::Seq, " " + seq + " exceeds n_positions " + std::to_string(c.n_positions) + " of " +
                            ch.base->source + "; use a shorter " + name(Choice::Seq));
    fail(Choice::Seq, " " + seq + " exceeds n_positions " + std::to_string(c.n_positions) + " of the " + ch.preset +
                          " preset; set " + name(Choice::NPositions) + " to " + seq);
  }
  if (std::string e = validate(c, spec.workload); !e.empty()) throw std::invalid_argument("invalid model: " + e);
  return spec;
}

}  // namespace memopt::gpt2

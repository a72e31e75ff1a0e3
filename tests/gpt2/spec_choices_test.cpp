// spec_choices_test.cpp: the one builder of a GPT-2 spec from a user's choices --
// preset defaults, overrides, a base config that fixes the dimensions, the position
// table, and an error for each bad choice that names it in the caller's words.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "gpt2/spec_choices.h"

namespace memopt::gpt2 {
namespace {

// The message of the std::invalid_argument `build` throws ("" when it does not).
std::string error_of(const Gpt2Choices& choices, ChoiceName name = choice_word) {
  try {
    build_gpt2_spec(choices, name);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(SpecChoices, PresetSuppliesEverythingNotChosen) {
  Gpt2Choices ch;
  ch.preset = "small";
  const Gpt2Spec s = build_gpt2_spec(ch);
  const Gpt2Preset p = *gpt2_preset("small");
  EXPECT_EQ(s.preset, "small");
  EXPECT_EQ(s.config.n_layer, p.config.n_layer);
  EXPECT_EQ(s.config.n_embd, p.config.n_embd);
  EXPECT_EQ(s.config.n_positions, p.config.n_positions);
  EXPECT_EQ(s.workload.batch, p.workload.batch);
  EXPECT_EQ(s.workload.seq_len, p.workload.seq_len);
  EXPECT_EQ(s.config.attn_pdrop, 0.1);
  EXPECT_EQ(s.config.granularity, Granularity::Block);
  EXPECT_EQ(s.config.attention, Attention::Explicit);
  EXPECT_EQ(s.config.kernels, Kernels::Aten);
  EXPECT_EQ(s.config.loss, Loss::Aten);
  EXPECT_EQ(s.seed, 1234u);
  EXPECT_TRUE(s.hf_dir.empty());
}

TEST(SpecChoices, OverridesApplyAndRenameTheModelOnlyWhenDimensionsChange) {
  Gpt2Choices ch;
  ch.batch = 2;
  ch.seq = 32;
  ch.dropout = 0.0;
  ch.granularity = "sublayer";
  ch.attention = "sdpa";
  ch.kernels = "memopt";
  ch.loss = "chunked";
  ch.seed = 7;
  Gpt2Spec s = build_gpt2_spec(ch);
  EXPECT_EQ(s.preset, "tiny");  // the workload and kernels do not change which model it is
  EXPECT_EQ(s.workload.batch, 2);
  EXPECT_EQ(s.workload.seq_len, 32);
  EXPECT_EQ(s.config.embd_pdrop, 0.0);
  EXPECT_EQ(s.config.resid_pdrop, 0.0);
  EXPECT_EQ(s.config.granularity, Granularity::Sublayer);
  EXPECT_EQ(s.config.attention, Attention::Sdpa);
  EXPECT_EQ(s.config.kernels, Kernels::Memopt);
  EXPECT_EQ(s.config.loss, Loss::Chunked);
  EXPECT_EQ(s.seed, 7u);

  ch.n_layer = 4;  // the preset's own value: still the preset
  EXPECT_EQ(build_gpt2_spec(ch).preset, "tiny");
  ch.n_layer = 2;
  s = build_gpt2_spec(ch);
  EXPECT_EQ(s.config.n_layer, 2);
  EXPECT_EQ(s.preset, "");
}

TEST(SpecChoices, BaseConfigFixesTheDimensions) {
  Gpt2Choices ch;
  Gpt2Config hf = gpt2_preset("small")->config;
  hf.set_dropout(0.05);
  hf.n_positions = 256;
  ch.base = BaseConfig{hf, "weights/config.json", "weights"};
  Gpt2Spec s = build_gpt2_spec(ch);
  EXPECT_EQ(s.preset, "");
  EXPECT_EQ(s.config.n_layer, 12);
  EXPECT_EQ(s.config.attn_pdrop, 0.05);  // the config's dropout unless one is chosen
  EXPECT_EQ(s.workload.seq_len, 128);    // the tiny preset's T, within the table
  EXPECT_TRUE(s.hf_dir.starts_with("/")) << s.hf_dir;
  EXPECT_TRUE(s.hf_dir.ends_with("weights")) << s.hf_dir;

  ch.preset = "small";  // T = 1024 by default: clipped to the config's 256 positions
  EXPECT_EQ(build_gpt2_spec(ch).workload.seq_len, 256);
  ch.n_embd = 768;  // repeating the config is allowed
  ch.dropout = 0.2;
  s = build_gpt2_spec(ch);
  EXPECT_EQ(s.config.attn_pdrop, 0.2);

  ch.n_embd = 512;
  EXPECT_EQ(error_of(ch), "n_embd 512 conflicts with weights/config.json, which says 768; drop it "
                          "(weights/config.json fixes the model's dimensions)");
  ch.n_embd.reset();
  ch.seq = 300;
  EXPECT_EQ(error_of(ch), "seq_len 300 exceeds n_positions 256 of weights/config.json; use a shorter seq_len");
}

TEST(SpecChoices, LongerSequenceIsRefusedOrGrowsTheTable) {
  Gpt2Choices ch;
  ch.seq = 300;
  EXPECT_EQ(error_of(ch), "seq_len 300 exceeds n_positions 128 of the tiny preset; set n_positions to 300");
  ch.n_positions = 300;
  EXPECT_EQ(build_gpt2_spec(ch).config.n_positions, 300);

  ch.n_positions.reset();
  ch.grow_positions = true;  // Note [Growing the position table]
  const Gpt2Spec s = build_gpt2_spec(ch);
  EXPECT_EQ(s.config.n_positions, 300);
  EXPECT_EQ(s.workload.seq_len, 300);
  EXPECT_EQ(s.preset, "tiny");
  ch.seq = 64;  // a table already long enough is left alone
  EXPECT_EQ(build_gpt2_spec(ch).config.n_positions, 128);
}

TEST(SpecChoices, EachBadChoiceIsNamedWithItsFix) {
  const auto with = [](auto edit) {
    Gpt2Choices ch;
    edit(ch);
    return error_of(ch);
  };
  EXPECT_EQ(with([](Gpt2Choices& c) { c.model = "llama"; }), "model: 'llama' is not supported; use gpt2");
  EXPECT_EQ(with([](Gpt2Choices& c) { c.preset = "huge"; }),
            std::string("preset: unknown preset 'huge'; choose one of ") + kPresetNames);
  EXPECT_EQ(with([](Gpt2Choices& c) { c.granularity = "layer"; }), "granularity: 'layer' is not block, sublayer or op");
  EXPECT_EQ(with([](Gpt2Choices& c) { c.attention = "flash"; }), "attention: 'flash' is not explicit or sdpa");
  EXPECT_EQ(with([](Gpt2Choices& c) { c.kernels = "cudnn"; }), "kernels: 'cudnn' is not memopt or aten");
  EXPECT_EQ(with([](Gpt2Choices& c) { c.loss = "fused"; }), "loss: 'fused' is not aten or chunked");
  // What only the whole model can check is named by validate()'s words.
  EXPECT_EQ(with([](Gpt2Choices& c) { c.n_head = 3; }),
            "invalid model: n_embd 128 is not divisible by n_head 3; pick n_embd as a multiple of n_head (GPT-2 "
            "uses head size 64)");
  EXPECT_EQ(with([](Gpt2Choices& c) { c.batch = 0; }), "invalid model: batch must be positive, got 0");
  EXPECT_NE(with([](Gpt2Choices& c) { c.dropout = 1.0; }).find("outside [0, 1)"), std::string::npos);
  EXPECT_NE(with([](Gpt2Choices& c) { c.n_layer = -1; }).find("n_layer must be positive, got -1"), std::string::npos);
}

TEST(SpecChoices, ErrorsNameChoicesInTheCallersWords) {
  const ChoiceName flag = [](Choice c) -> const char* {
    switch (c) {
      case Choice::Seq: return "--seq";
      case Choice::NPositions: return "--n-positions";
      case Choice::Preset: return "--preset";
      default: return "--other";
    }
  };
  Gpt2Choices ch;
  ch.seq = 300;
  EXPECT_EQ(error_of(ch, flag), "--seq 300 exceeds n_positions 128 of the tiny preset; set --n-positions to 300");
  ch.preset = "huge";
  EXPECT_EQ(error_of(ch, flag).rfind("--preset: unknown preset 'huge'", 0), 0u);
}

TEST(SpecChoices, ChoiceTableNamesEveryChoiceOnce) {
  for (const auto& row : kChoices) EXPECT_STREQ(choice_word(row.value), row.word);
  EXPECT_STREQ(choice_word(Choice::Seq), "seq_len");  // the profile's "model" key
}

// Note [Loss choice]: the profile's "model" object records the loss; one written
// before the field existed means aten; an unknown word is refused by name.
TEST(SpecJson, LossIsRecordedAndReadBack) {
  Gpt2Choices ch;
  ch.loss = "chunked";
  nlohmann::json j = gpt2_spec_to_json(build_gpt2_spec(ch));
  EXPECT_EQ(j.at("loss"), "chunked");
  EXPECT_EQ(gpt2_spec_from_json(j).config.loss, Loss::Chunked);
  j.erase("loss");
  EXPECT_EQ(gpt2_spec_from_json(j).config.loss, Loss::Aten);
  j["loss"] = "fused";
  try {
    gpt2_spec_from_json(j);
    ADD_FAILURE() << "accepted loss 'fused'";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "model/loss: 'fused' is not aten or chunked");
  }
}

}  // namespace
}  // namespace memopt::gpt2

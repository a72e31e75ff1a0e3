// hf_weights_test.cpp: the safetensors reader/writer and the errors of the Hugging
// Face loader, which must name the file, the tensor and what is wrong.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/gpt2.h"
#include "model/hf_weights.h"
#include "tests/model/gpt2_reference.h"

namespace memopt::model {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::path(MEMOPT_BINARY_DIR) / "test_data" / (name + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripsEveryDtype) {
  const fs::path dir = scratch_dir("safetensors_roundtrip");
  const std::map<std::string, at::Tensor> tensors = {
      {"f32", at::randn({3, 4})},
      {"f64", at::randn({2}, at::kDouble)},
      {"bf16", at::randn({5}).to(at::kBFloat16)},
      {"i64", at::arange(6, at::kLong).view({2, 3})},
      {"flag", at::ones({2}, at::kBool)},
      {"scalar", at::scalar_tensor(2.5)},
  };
  write_safetensors((dir / "t.safetensors").string(), tensors);
  const auto back = read_safetensors((dir / "t.safetensors").string());
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(back.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(back.at(name), t)) << name;
  }
  fs::remove_all(dir);
}

TEST(Safetensors, TruncatedFileIsNamed) {
  const fs::path dir = scratch_dir("safetensors_truncated");
  const std::string path = (dir / "t.safetensors").string();
  write_safetensors(path, {{"w", at::randn({64})}});
  fs::resize_file(path, fs::file_size(path) - 10);
  const std::string e = error_of([&] { SafetensorsFile file(path); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  fs::remove_all(dir);
}

class HfDirErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::Reference ref = testing::gpt2_reference();
    if (ref.dir.empty()) GTEST_FAIL() << ref.error;
    dir_ = scratch_dir("hf_errors");
    fs::copy_file(fs::path(ref.dir) / "config.json", dir_ / "config.json");
    weights_ = read_safetensors(ref.dir + "/model.safetensors");
    spec_.config = read_hf_gpt2_config(ref.dir);
    spec_.hf_dir = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::map<std::string, at::Tensor> weights_;
  gpt2::Gpt2Spec spec_;
};

TEST_F(HfDirErrors, LoadsTheUntouchedCopy) {
  write_safetensors((dir_ / "model.safetensors").string(), weights_);
  EXPECT_NO_THROW(make_gpt2(spec_));
}

TEST_F(HfDirErrors, MissingTensorIsNamed) {
  weights_.erase("transformer.h.1.mlp.c_fc.bias");
  write_safetensors((dir_ / "model.safetensors").string(), weights_);
  const std::string e = error_of([&] { make_gpt2(spec_); });
  EXPECT_NE(e.find((dir_ / "model.safetensors").string()), std::string::npos) << e;
  EXPECT_NE(e.find("h.1.mlp.c_fc.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST_F(HfDirErrors, WrongShapeIsNamedWithBothShapes) {
  weights_["transformer.h.0.attn.c_attn.weight"] = at::zeros({64, 100});
  write_safetensors((dir_ / "model.safetensors").string(), weights_);
  const std::string e = error_of([&] { make_gpt2(spec_); });
  EXPECT_NE(e.find("transformer.h.0.attn.c_attn.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[64, 100]"), std::string::npos) << e;
  EXPECT_NE(e.find("[64, 192]"), std::string::npos) << e;  // Conv1D's [in, out]
}

TEST_F(HfDirErrors, UnprefixedNamesAndHalfPrecisionLoad) {
  // The original OpenAI-converted checkpoints have no "transformer." prefix and
  // carry the attention mask buffers; fp16 files exist too.
  std::map<std::string, at::Tensor> renamed;
  for (const auto& [name, t] : weights_)
    renamed[name.starts_with("transformer.") ? name.substr(12) : name] = t.to(at::kHalf);
  renamed["h.0.attn.bias"] = at::ones({1, 1, 32, 32}, at::kBool);
  write_safetensors((dir_ / "model.safetensors").string(), renamed);
  const Gpt2 model = make_gpt2(spec_);
  EXPECT_TRUE(at::equal(model->wte->weight, weights_.at("transformer.wte.weight").to(at::kHalf).to(at::kFloat)));
}

TEST_F(HfDirErrors, UnsupportedConfigIsNamed) {
  std::ofstream(dir_ / "config.json") << R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
      "vocab_size": 96, "n_positions": 32, "activation_function": "relu"})";
  const std::string e = error_of([&] { read_hf_gpt2_config(dir_.string()); });
  EXPECT_NE(e.find("config.json: activation_function"), std::string::npos) << e;
}

}  // namespace
}  // namespace memopt::model

// factory_test.cpp: Note [One factory for the models] -- the model a profile's `model`
// object names is the one GPT-2's own constructor builds from the same spec, weights,
// stages and batch alike; objects that name no model are refused with the field and
// the fix.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "gpt2/config.h"
#include "model/factory.h"
#include "model/gpt2.h"

namespace memopt::model {
namespace {

gpt2::Gpt2Spec tiny_spec() {
  gpt2::Gpt2Spec spec;
  spec.config = gpt2::gpt2_preset("tiny")->config;
  spec.config.n_layer = 2;
  spec.config.granularity = gpt2::Granularity::Sublayer;
  spec.workload = {2, 16};
  spec.seed = 77;
  return spec;
}

TEST(ModelFactory, BuildsWhatTheModelsOwnConstructorBuildsFromTheSameSpec) {
  const gpt2::Gpt2Spec spec = tiny_spec();
  const BuiltModel built = build_model(gpt2::gpt2_spec_to_json(spec));
  const StagedModel direct = stage_gpt2(make_gpt2(spec));
  const Batch batch = make_gpt2_batch(spec);
  ASSERT_EQ(built.staged.num_stages(), direct.num_stages());
  for (int i = 0; i < direct.num_stages(); ++i) EXPECT_EQ(built.staged.stage(i).name, direct.stage(i).name);
  const auto a = built.staged.parameters(), b = direct.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(at::equal(a[k], b[k])) << "parameter " << k;
  EXPECT_TRUE(at::equal(built.batch.input, batch.input));
  EXPECT_TRUE(at::equal(built.batch.targets, batch.targets));
  // Another seed builds other weights: the factory does read the object.
  gpt2::Gpt2Spec other = spec;
  other.seed = 78;
  EXPECT_FALSE(at::equal(build_model(gpt2::gpt2_spec_to_json(other)).staged.parameters()[0], a[0]));
}

std::string error_of(const nlohmann::json& model) {
  try {
    build_model(model);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFactory, RefusesObjectsThatNameNoModelItBuilds) {
  EXPECT_EQ(known_model_names(), "gpt2");
  nlohmann::json model = gpt2::gpt2_spec_to_json(tiny_spec());
  model["name"] = "llama";
  const std::string unknown = error_of(model);
  EXPECT_NE(unknown.find("model/name: 'llama'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("gpt2"), std::string::npos) << unknown;
  model.erase("name");
  EXPECT_NE(error_of(model).find("model/name: missing"), std::string::npos) << error_of(model);
  EXPECT_NE(error_of(nlohmann::json::array()).find("model: not an object"), std::string::npos);
  // The model's own fields are its own to check.
  nlohmann::json bad = gpt2::gpt2_spec_to_json(tiny_spec());
  bad.erase("n_layer");
  EXPECT_NE(error_of(bad).find("n_layer"), std::string::npos) << error_of(bad);
}

}  // namespace
}  // namespace memopt::model

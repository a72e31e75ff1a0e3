// factory.cpp: Note [One factory for the models] in factory.h.
#include "model/factory.h"

#include <stdexcept>
#include <string_view>

#include "gpt2/config.h"
#include "model/gpt2.h"

namespace memopt::model {
namespace {

BuiltModel build_gpt2(const nlohmann::json& model) {
  const gpt2::Gpt2Spec spec = gpt2::gpt2_spec_from_json(model);
  return {stage_gpt2(make_gpt2(spec)), make_gpt2_batch(spec)};
}

struct ModelRow {
  std::string_view name;  // the model object's "name"
  BuiltModel (*build)(const nlohmann::json& model);
};

constexpr ModelRow kModels[] = {
    {"gpt2", build_gpt2},
};

}  // namespace

BuiltModel build_model(const nlohmann::json& model) {
  if (!model.is_object()) throw std::invalid_argument("model: not an object; the profile names its model there");
  const auto name = model.find("name");
  if (name == model.end() || !name->is_string())
    throw std::invalid_argument("model/name: missing; memopt builds " + known_model_names());
  for (const ModelRow& row : kModels)
    if (row.name == name->get<std::string>()) return row.build(model);
  throw std::invalid_argument("model/name: '" + name->get<std::string>() + "' is not a model memopt builds (" +
                              known_model_names() + "); profile the model with `memopt profile`");
}

std::string known_model_names() {
  std::string names;
  for (const ModelRow& row : kModels) {
    if (!names.empty()) names += ", ";
    names += row.name;
  }
  return names;
}

}  // namespace memopt::model

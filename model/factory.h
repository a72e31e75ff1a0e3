// factory.h: the one place a profile's `model` object becomes a model to train and
// its batch (Note [One factory for the models]).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "model/staged_model.h"

namespace memopt::model {

// Note [One factory for the models]
// `memopt profile`, `memopt run`, `memopt tradeoff --run` and `memopt train` all build
// the model a profile describes, and must build the very same one: the same stages,
// weights and batch, or a plan made on one profile would run on another model. So each
// builds it here, from the profile's `model` object, by its "name"; a model memopt can
// train is one row of the table in factory.cpp, and nothing else names a model's
// constructor. The object's other fields belong to that model (docs/formats.md, "The
// `model` object (GPT-2)").
struct BuiltModel {
  StagedModel staged;  // on the CPU, as built (LibTorch modules start in training mode)
  Batch batch;         // the profile's batch, on the CPU
};

// Throws std::invalid_argument naming model/name and the models memopt knows when the
// object names none of them, or the model's own field errors.
BuiltModel build_model(const nlohmann::json& model);

// The names build_model knows, comma-separated, for errors and help texts.
std::string known_model_names();

}  // namespace memopt::model

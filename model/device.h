// device.h: moving a staged model and its batch to the device that will run them (the
// profiler measures them where they are).
#pragma once

#include <c10/core/Device.h>

#include "model/staged_model.h"

namespace memopt::model {

// The model's parameters and buffers, and the batch's input and targets (when it has
// them), to `device`.
void move_to(StagedModel& model, Batch& batch, c10::Device device);

}  // namespace memopt::model

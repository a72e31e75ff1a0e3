// device.cpp: a model and its batch to a device.
#include "model/device.h"

namespace memopt::model {

void move_to(StagedModel& model, Batch& batch, c10::Device device) {
  model.module().to(device);
  batch.input = batch.input.to(device);
  if (batch.targets.defined()) batch.targets = batch.targets.to(device);
}

}  // namespace memopt::model

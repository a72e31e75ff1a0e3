// staged_model.h: the seam between models and everything that schedules them -- a
// model as an ordered chain of named stages a_i -> a_{i+1} (docs/formats.md, "The chain model") plus the
// parameters they use. The profiler measures it, the executor replays schedules on it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "solver/chain/chain.h"

namespace torch::nn {
class SequentialImpl;
}

namespace memopt::model {

// One training sample batch. `input` is a_0; `targets` is read only by a final stage
// that computes the loss (undefined for chains whose loss the caller computes).
// `step_inputs` are what stages read besides their input and the targets, made once
// before the step (a decoder's rotary tables, causal mask, position ids). None counts
// as an activation of a stage: all exist before the step starts, and a stage that
// saves one for backward shares it, so moving a stage's saved state leaves them.
struct Batch {
  at::Tensor input;
  at::Tensor targets;
  std::vector<at::Tensor> step_inputs;
};

// Note [Multi-tensor activations]
// An activation a_i is a list of tensors. Most stages take one and return one. An
// operator stage (GPT-2 at --granularity op) passes the residual stream beside its
// value: ln_1 maps x to (x, ln_1(x)), and the list it returns begins with the very
// tensor object its input began with. That is what docs/formats.md, "Carried bytes" calls
// carried bytes: the two activations share those bytes, and a backward hands the
// carried tensor's gradient straight to the input's (backward_stage), so d_i shares
// them with d_{i+1} too. A carried tensor is always a prefix of both lists.
using Activation = std::vector<at::Tensor>;

// A stage maps its input a_i to a_{i+1}. It must be a pure function of its input, the
// batch, the parameters and the global RNG (dropout), so that a recompute restoring
// the RNG state reproduces it exactly, and it must work both under autograd and
// without grad.
struct Stage {
  std::string name;
  std::function<Activation(const Activation& input, const Batch& batch)> forward;
  // Parameters this stage reads. A tied parameter (GPT-2's wte) appears in every
  // stage that reads it; StagedModel::parameters() lists it once.
  std::vector<at::Tensor> parameters;
  // What the selective and pointwise baselines read; the profiler writes it.
  solver::StageRole role = solver::StageRole::Other;
  // The block this stage is part of, empty if none; the profiler writes it (Note [Block
  // boundaries] in solver/chain/coarsen.h).
  std::string block;
};

// The forward of a stage of one tensor in and one out.
using TensorForward = std::function<at::Tensor(const at::Tensor& input, const Batch& batch)>;
std::function<Activation(const Activation&, const Batch&)> one_tensor(TensorForward forward);

// One stage's backward, as the executor and the profiler run it. `leaves` is the
// stage's input, detached (floating tensors requiring grad), `output` what the stage
// returned from them, `grads` the gradients of `output`. Returns the gradients of the
// leaves (undefined where a leaf needs none) and leaves no .grad behind. An output
// tensor that is one of the leaves (carried, Note [Multi-tensor activations]) is no
// root of the backward: its gradient is the leaf's, plus whatever the graph adds.
Activation backward_stage(const Activation& output, const Activation& leaves, const Activation& grads);

// The detached copy of an activation a stage's backward starts from: floating
// tensors require grad (when `with_grad`), others (token ids) do not.
Activation detached_leaves(const Activation& input, bool with_grad = true);

// Bytes of the distinct storages of these tensors.
int64_t activation_bytes(const Activation& a);
// Bytes of the storages of `output` that are storages of `input` too: the carried bytes.
int64_t carried_bytes(const Activation& input, const Activation& output);

// Note [Why the loss is a stage]
// When `ends_with_loss` is true the last stage returns the scalar loss, so a_L is
// that scalar, the loss op of docs/formats.md, "Operations and memory without offload: the
// sequential simulator" only seeds d_L = 1 (ub_L = btmp_L = 0),
// and the big logits live and die inside one stage instead of crossing a boundary.
// When it is false (e.g. a Sequential wrapped for an ordinary training loop), a_L is
// the model's output and d_L comes from whoever computes the loss outside.
class StagedModel {
 public:
  // `owner` keeps the modules behind the stage functions alive and carries their
  // train/eval flag; it may own more than the stages read.
  StagedModel(std::vector<Stage> stages, std::shared_ptr<torch::nn::Module> owner, bool ends_with_loss);

  // Each child of `seq` becomes one stage named "<index>.<module name>"; the chain's
  // output is the Sequential's output (ends_with_loss = false).
  static StagedModel from_sequential(const std::shared_ptr<torch::nn::SequentialImpl>& seq);

  int num_stages() const { return static_cast<int>(stages_.size()); }  // L
  const Stage& stage(int i) const { return stages_.at(static_cast<size_t>(i)); }
  const std::vector<Stage>& stages() const { return stages_; }
  bool ends_with_loss() const { return ends_with_loss_; }

  Activation forward_stage(int i, const Activation& input, const Batch& batch) const;
  // A stage of one tensor in and out (throws std::invalid_argument otherwise).
  at::Tensor forward_stage(int i, const at::Tensor& input, const Batch& batch) const;
  // All stages in order from batch.input: the loss when ends_with_loss(), else the output.
  at::Tensor forward(const Batch& batch) const;

  // Every parameter once (tied ones at their first use), in stage order.
  std::vector<at::Tensor> parameters() const;
  int64_t parameter_bytes() const;

  // Stages [begin, end) as a model of their own sharing these parameters: one
  // pipeline stage. It ends with the loss only when it ends where this model does.
  StagedModel slice(int begin, int end) const;

  // Dropout on (true) or off; forwards to the owner module.
  void train(bool on = true) { owner_->train(on); }
  bool is_training() const { return owner_->is_training(); }
  torch::nn::Module& module() { return *owner_; }
  const torch::nn::Module& module() const { return *owner_; }

 private:
  std::vector<Stage> stages_;
  std::shared_ptr<torch::nn::Module> owner_;
  bool ends_with_loss_;
};

// Note [Parameter homes]
// A parameter's home is the first stage that reads it. Its gradient is complete
// after that stage's backward (backward runs L-1..0), so ZeRO reduce-scatters a
// stage's homed parameters there, and the profile records per stage the bytes homed
// at it and the bytes it reads from earlier homes (GPT-2's head reads the tied wte,
// homed at embed) so that `memopt plan` can size gather buffers without LibTorch.
struct ParameterHomes {
  std::vector<int> home;                       // per parameter of StagedModel::parameters()
  std::vector<std::vector<int>> homed;         // per stage: parameters homed there
  std::vector<std::vector<int>> foreign_reads; // per stage: parameters it reads homed earlier
};
ParameterHomes parameter_homes(const StagedModel& model);

}  // namespace memopt::model

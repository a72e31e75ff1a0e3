// staged_model.cpp: StagedModel, and the adapter that turns any torch::nn::Sequential
// into one stage per child.
#include "model/staged_model.h"

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/container/sequential.h>

namespace memopt::model {

StagedModel::StagedModel(std::vector<Stage> stages, std::shared_ptr<torch::nn::Module> owner,
                         bool ends_with_loss)
    : stages_(std::move(stages)), owner_(std::move(owner)), ends_with_loss_(ends_with_loss) {
  if (stages_.empty()) throw std::invalid_argument("StagedModel: a model needs at least one stage");
  if (!owner_) throw std::invalid_argument("StagedModel: the owner module is null");
  for (const Stage& s : stages_)
    if (!s.forward) throw std::invalid_argument("StagedModel: stage '" + s.name + "' has no forward function");
}

StagedModel StagedModel::from_sequential(const std::shared_ptr<torch::nn::SequentialImpl>& seq) {
  if (!seq || seq->is_empty()) throw std::invalid_argument("StagedModel::from_sequential: the Sequential is empty");
  std::vector<Stage> stages;
  size_t i = 0;
  for (const torch::nn::AnyModule& any : *seq) {
    // Copying the AnyModule shares the module; the owner below keeps it alive anyway.
    torch::nn::AnyModule child = any;
    const std::shared_ptr<torch::nn::Module> module = child.ptr();
    std::string name = module->name();
    // "torch::nn::LinearImpl" -> "Linear"
    if (const auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
    if (name.ends_with("Impl")) name.resize(name.size() - 4);
    Stage stage;
    stage.name = std::to_string(i++) + "." + name;
    stage.forward = one_tensor([child](const at::Tensor& x, const Batch&) mutable { return child.forward<at::Tensor>(x); });
    stage.parameters = module->parameters(/*recurse=*/true);
    stages.push_back(std::move(stage));
  }
  return StagedModel(std::move(stages), seq, /*ends_with_loss=*/false);
}

// Note [A stage leaves no cached casts]
// Under autocast, ATen caches the low-precision copy of each weight it casts until the
// outermost autocast region ends: in a user's step, the whole forward. So a stage that
// runs without saving (fwd_ckpt, fwd_drop) would leave its weights' copies held by the
// cache through every later stage, and the profiler, whose repeated runs find the
// copies already cached, would see neither them nor the copies a kept stage saves.
// Each stage's forward therefore starts and ends with the cache empty: a copy that the
// stage saves lives as its saved state, one it does not is a temporary of the stage,
// as the profile measures both. The cast values are the same; a weight cast in two
// stages is cast twice, and its two gradients meet in its own precision, not in the
// copy's.
Activation StagedModel::forward_stage(int i, const Activation& input, const Batch& batch) const {
  at::autocast::clear_cache();
  Activation out = stage(i).forward(input, batch);
  at::autocast::clear_cache();
  return out;
}

at::Tensor StagedModel::forward_stage(int i, const at::Tensor& input, const Batch& batch) const {
  Activation out = forward_stage(i, Activation{input}, batch);
  if (out.size() != 1)
    throw std::invalid_argument("stage '" + stage(i).name + "' returns " + std::to_string(out.size()) +
                                " tensors, not one");
  return out[0];
}

at::Tensor StagedModel::forward(const Batch& batch) const {
  Activation a{batch.input};
  for (int i = 0; i < num_stages(); ++i) a = forward_stage(i, a, batch);
  if (a.size() != 1)
    throw std::invalid_argument("StagedModel: the last stage returns " + std::to_string(a.size()) +
                                " tensors; a chain ends with one (its output or its loss)");
  return a[0];
}

std::function<Activation(const Activation&, const Batch&)> one_tensor(TensorForward forward) {
  return [forward = std::move(forward)](const Activation& input, const Batch& batch) {
    if (input.size() != 1)
      throw std::invalid_argument("a one-tensor stage was given " + std::to_string(input.size()) + " tensors");
    return Activation{forward(input[0], batch)};
  };
}

Activation detached_leaves(const Activation& input, bool with_grad) {
  Activation leaves;
  leaves.reserve(input.size());
  for (const at::Tensor& t : input) {
    at::Tensor leaf = t.detach();
    if (with_grad && at::isFloatingType(leaf.scalar_type())) leaf.requires_grad_(true);
    leaves.push_back(std::move(leaf));
  }
  return leaves;
}

Activation backward_stage(const Activation& output, const Activation& leaves, const Activation& grads) {
  if (grads.size() != output.size())
    throw std::logic_error("backward_stage: " + std::to_string(grads.size()) + " gradients for " +
                           std::to_string(output.size()) + " outputs");
  std::vector<int> carried_to(output.size(), -1);
  std::vector<at::Tensor> roots, root_grads;
  for (size_t j = 0; j < output.size(); ++j) {
    for (size_t m = 0; m < leaves.size(); ++m)
      if (leaves[m].defined() && leaves[m].unsafeGetTensorImpl() == output[j].unsafeGetTensorImpl())
        carried_to[j] = static_cast<int>(m);
    if (carried_to[j] < 0 && output[j].requires_grad()) {
      roots.push_back(output[j]);
      root_grads.push_back(grads[j]);
    }
  }
  if (!roots.empty()) torch::autograd::backward(roots, root_grads);
  Activation d(leaves.size());
  for (size_t m = 0; m < leaves.size(); ++m) {
    if (!leaves[m].defined() || !leaves[m].requires_grad()) continue;
    d[m] = leaves[m].grad();
    // d_i belongs to the caller alone: a leaf kept alive elsewhere would otherwise
    // keep it through its .grad.
    const_cast<at::Tensor&>(leaves[m]).mutable_grad().reset();
  }
  for (size_t j = 0; j < output.size(); ++j) {
    const int m = carried_to[j];
    if (m < 0 || !grads[j].defined()) continue;
    // The carried tensor's gradient passes through unchanged; where the stage also
    // read that tensor (ln_1 reads x), the graph's part is added in place -- one
    // addition of two terms, as the whole graph's backward makes it.
    d[m] = d[m].defined() ? d[m].add_(grads[j]) : grads[j];
  }
  return d;
}

int64_t activation_bytes(const Activation& a) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  for (const at::Tensor& t : a)
    if (t.defined() && seen.insert(t.storage().unsafeGetStorageImpl()).second)
      bytes += static_cast<int64_t>(t.storage().nbytes());
  return bytes;
}

int64_t carried_bytes(const Activation& input, const Activation& output) {
  std::unordered_set<const void*> in;
  for (const at::Tensor& t : input)
    if (t.defined()) in.insert(t.storage().unsafeGetStorageImpl());
  Activation shared;
  for (const at::Tensor& t : output)
    if (t.defined() && in.count(t.storage().unsafeGetStorageImpl())) shared.push_back(t);
  return activation_bytes(shared);
}

std::vector<at::Tensor> StagedModel::parameters() const {
  std::vector<at::Tensor> out;
  std::unordered_set<const void*> seen;
  for (const Stage& s : stages_)
    for (const at::Tensor& p : s.parameters)
      if (seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  return out;
}

StagedModel StagedModel::slice(int begin, int end) const {
  if (begin < 0 || end > num_stages() || begin >= end)
    throw std::invalid_argument("StagedModel::slice: [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") is not a non-empty range of " + std::to_string(num_stages()) + " stages");
  std::vector<Stage> part(stages_.begin() + begin, stages_.begin() + end);
  return StagedModel(std::move(part), owner_, ends_with_loss_ && end == num_stages());
}

ParameterHomes parameter_homes(const StagedModel& model) {
  const std::vector<at::Tensor> params = model.parameters();
  std::unordered_map<const void*, int> index;
  for (size_t k = 0; k < params.size(); ++k) index[params[k].unsafeGetTensorImpl()] = static_cast<int>(k);
  ParameterHomes h;
  h.home.assign(params.size(), -1);
  h.homed.resize(model.num_stages());
  h.foreign_reads.resize(model.num_stages());
  for (int i = 0; i < model.num_stages(); ++i) {
    std::unordered_set<int> seen;
    for (const at::Tensor& p : model.stage(i).parameters) {
      const int k = index.at(p.unsafeGetTensorImpl());
      if (!seen.insert(k).second) continue;
      if (h.home[k] < 0) {
        h.home[k] = i;
        h.homed[i].push_back(k);
      } else if (h.home[k] != i) {
        h.foreign_reads[i].push_back(k);
      }
    }
  }
  return h;
}

int64_t StagedModel::parameter_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : parameters()) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

}  // namespace memopt::model

// staged_model.cpp: StagedModel, and the adapter that turns any torch::nn::Sequential
// into one stage per child.
#include "model/staged_model.h"

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

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
    stage.forward = [child](const at::Tensor& x, const Batch&) mutable { return child.forward<at::Tensor>(x); };
    stage.parameters = module->parameters(/*recurse=*/true);
    stages.push_back(std::move(stage));
  }
  return StagedModel(std::move(stages), seq, /*ends_with_loss=*/false);
}

at::Tensor StagedModel::forward_stage(int i, const at::Tensor& input, const Batch& batch) const {
  return stage(i).forward(input, batch);
}

at::Tensor StagedModel::forward(const Batch& batch) const {
  at::Tensor a = batch.input;
  for (const Stage& s : stages_) a = s.forward(a, batch);
  return a;
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

// staged_model.cpp: StagedModel, and the adapter that turns any torch::nn::Sequential
// into one stage per child.
#include "runtime/staged_model.h"

#include <stdexcept>
#include <unordered_set>

#include <torch/nn/modules/container/sequential.h>

namespace memopt::runtime {

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

int64_t StagedModel::parameter_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : parameters()) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

}  // namespace memopt::runtime

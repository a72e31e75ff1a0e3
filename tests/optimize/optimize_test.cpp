// optimize_test.cpp: memopt::optimize on an arbitrary Sequential (with dropout)
// against the same Sequential trained by plain autograd, plan saving and loading,
// and the README showing the example program verbatim.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "optimize/optimize.h"
#include "runtime/train_step.h"

namespace memopt {
namespace {

torch::nn::Sequential make_mlp() {
  return torch::nn::Sequential(torch::nn::Linear(32, 64), torch::nn::Tanh(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(64, 64), torch::nn::Tanh(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(64, 8));
}

std::vector<at::Tensor> grads_of(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.grad().clone());
  return out;
}

// Same step, same RNG state, one thread: the scheduled gradients must equal plain
// autograd's exactly (Note [Scheduled equals plain, bit for bit] in executor_test).
TEST(Optimize, SequentialTrainsWithExactlyThePlainGradients) {
  at::set_num_threads(1);
  torch::manual_seed(3);
  torch::nn::Sequential seq = make_mlp();
  const at::Tensor x = at::randn({16, 32}), y = at::randn({16, 8});
  OptimizeOptions options;
  options.budget = "min";
  options.profile.repeat = 1;
  auto net = optimize(seq, x, options);
  // At the smallest budget something must be recomputed, or the test proves little.
  int forwards = 0;
  for (const auto& op : net->schedule().ops)
    forwards += op.kind == solver::OpKind::FwdKeep || op.kind == solver::OpKind::FwdCkpt || op.kind == solver::OpKind::FwdDrop;
  EXPECT_GT(forwards, static_cast<int>(seq->size()));

  const runtime::CpuRngState rng = runtime::cpu_rng_state();
  net->zero_grad();
  const at::Tensor loss = (net->forward(x) - y).pow(2).mean();
  loss.backward();
  const auto scheduled = grads_of(*net);

  runtime::set_cpu_rng_state(rng);
  seq->zero_grad();
  const at::Tensor plain_loss = (seq->forward(x) - y).pow(2).mean();
  plain_loss.backward();
  const auto plain = grads_of(*seq);
  EXPECT_EQ(loss.item<double>(), plain_loss.item<double>());
  ASSERT_EQ(scheduled.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(scheduled[i], plain[i])) << "parameter " << i;
}

TEST(Optimize, SavedPlanIsLoadedWithoutProfiling) {
  const auto dir = std::filesystem::temp_directory_path() / "memopt_optimize_test";
  std::filesystem::create_directories(dir);
  const std::string plan = (dir / "plan.json").string();
  std::filesystem::remove(plan);
  torch::nn::Sequential seq = make_mlp();
  const at::Tensor x = at::randn({16, 32});
  OptimizeOptions save;
  save.budget = "90%";
  save.profile.repeat = 1;
  save.save_schedule = plan;
  auto first = optimize(seq, x, save);
  ASSERT_TRUE(std::filesystem::exists(plan));
  EXPECT_TRUE(std::filesystem::exists(dir / "plan.profile.json"));
  OptimizeOptions load;
  load.load_schedule = plan;
  load.solver = "no-such-solver";  // proves nothing is solved: it would throw
  auto second = optimize(seq, x, load);
  EXPECT_EQ(second->schedule().ops, first->schedule().ops);
  EXPECT_EQ(second->schedule().budget_bytes, first->schedule().budget_bytes);
}

TEST(Optimize, ReadmeShowsTheExampleVerbatim) {
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string example = read(std::string(MEMOPT_SOURCE_DIR) + "/examples/optimize_sequential.cpp");
  const std::string readme = read(std::string(MEMOPT_SOURCE_DIR) + "/README.md");
  ASSERT_FALSE(example.empty());
  EXPECT_NE(readme.find(example), std::string::npos) << "README.md must quote examples/optimize_sequential.cpp verbatim";
}

}  // namespace
}  // namespace memopt

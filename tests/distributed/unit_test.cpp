// unit_test.cpp: the single-process pieces of the distributed engine -- flat AdamW
// against torch::optim::AdamW, and the launcher's environment variables.
#include <map>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include "distributed/flat_adamw.h"
#include "distributed/launch_env.h"

namespace memopt::distributed {
namespace {

TEST(FlatAdamW, MatchesTorchAdamWOnSplitPartitions) {
  // Two parameters updated by torch's AdamW, and the same values flattened, split in
  // three partitions (as three ranks would own them) and updated by FlatAdamW.
  at::manual_seed(3);
  at::Tensor a = at::randn({7, 5}), b = at::randn({11});
  std::vector<at::Tensor> ref{a.clone().requires_grad_(true), b.clone().requires_grad_(true)};
  torch::optim::AdamW torch_adamw(ref, torch::optim::AdamWOptions(3e-3).weight_decay(0.05));
  at::Tensor flat = at::cat({a.flatten(), b});  // 46 elements -> partitions 16, 16, 14
  const std::vector<int64_t> bounds{0, 16, 32, 46};
  AdamWConfig config;
  config.lr = 3e-3;
  config.weight_decay = 0.05;
  std::vector<FlatAdamW> parts;
  for (size_t p = 0; p + 1 < bounds.size(); ++p) parts.emplace_back(bounds[p + 1] - bounds[p], config);
  for (int step = 0; step < 6; ++step) {
    const at::Tensor ga = at::randn({7, 5}) * (step + 1), gb = at::randn({11}) * 1e-3;
    ref[0].mutable_grad() = ga.clone();
    ref[1].mutable_grad() = gb.clone();
    torch_adamw.step();
    const at::Tensor g = at::cat({ga.flatten(), gb});
    for (size_t p = 0; p < parts.size(); ++p) {
      at::Tensor mine = flat.narrow(0, bounds[p], bounds[p + 1] - bounds[p]);
      parts[p].step(mine, g.narrow(0, bounds[p], bounds[p + 1] - bounds[p]));
    }
  }
  const at::Tensor expected = at::cat({ref[0].detach().flatten(), ref[1].detach()});
  // The same float operations in the same order: bit-identical.
  EXPECT_TRUE(at::equal(flat, expected)) << "max |diff| " << (flat - expected).abs().max().item<double>();
  EXPECT_EQ(parts[0].steps_taken(), 6);
  EXPECT_EQ(parts[0].state_bytes(), 2 * 16 * 4);
}

LaunchEnv env_of(const std::map<std::string, std::string>& vars) {
  return launch_env_from([&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    env_of(vars);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  const LaunchEnv e = env_of({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "3"},
                              {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_FALSE(e.agent_store);
  EXPECT_TRUE(env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "1"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}}).agent_store);
  // A plain multi-process launch may leave LOCAL_RANK out.
  EXPECT_EQ(env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}).local_rank, 1);
}

TEST(LaunchEnv, ErrorsNameTheVariableAndTheFix) {
  const std::map<std::string, std::string> ok{
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
  for (const char* missing : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    auto vars = ok;
    vars.erase(missing);
    const std::string e = error_of(vars);
    EXPECT_NE(e.find(std::string(missing) + " is not set"), std::string::npos) << e;
    EXPECT_NE(e.find("torchrun"), std::string::npos) << e;
  }
  auto bad = ok;
  bad["RANK"] = "2";
  EXPECT_NE(error_of(bad).find("RANK=2 is outside [0, 1]"), std::string::npos) << error_of(bad);
  bad = ok;
  bad["MASTER_PORT"] = "70000";
  EXPECT_NE(error_of(bad).find("MASTER_PORT=70000 is outside"), std::string::npos);
  bad = ok;
  bad["WORLD_SIZE"] = "two";
  EXPECT_NE(error_of(bad).find("WORLD_SIZE='two' is not an integer"), std::string::npos);
}

}  // namespace
}  // namespace memopt::distributed

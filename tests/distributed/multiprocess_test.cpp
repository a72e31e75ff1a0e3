// multiprocess_test.cpp: `memopt train` as 2-4 processes over Gloo on loopback.
// Parameters after N steps must equal single-process training on the same global
// batch (plain autograd + torch::optim::AdamW, in this process); measured per-rank
// persistent bytes must equal `memopt plan`'s; a rank that dies or hangs must make
// the others fail within the timeout, leaving no result files. Every child is killed
// and reaped when a test ends, whatever happens.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include "distributed/comm.h"
#include "distributed/trainer.h"
#include "model/gpt2.h"
#include "model/hf_weights.h"
#include "solver/dp/baselines.h"
#include "solver/distributed/distributed_plan.h"
#include "solver/io/profile_json.h"
#include "solver/chain/schedule.h"
#include "solver/io/schedule_json.h"

namespace memopt::distributed {
namespace {

namespace fs = std::filesystem;
const std::string kMemopt = MEMOPT_BINARY_DIR "/tools/memopt";
constexpr int kSteps = 3;
// Note [Test AdamW eps]: Adam divides by sqrt(v), so a gradient scaled by 2 moves
// parameters the same; eps = 1e-3 (gradients here are ~1e-4..1e-2) makes the update
// depend on the gradient's scale, so a wrong 1/(D x M) would fail the comparison.
constexpr double kLr = 1e-3, kEps = 1e-3;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int run_command(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()); }

// The ranks of one job. The destructor SIGKILLs and reaps whatever still runs.
class Ranks {
 public:
  Ranks(int world, const std::vector<std::string>& args, const std::string& log_prefix) {
    const std::string port = std::to_string(free_port());
    for (int r = 0; r < world; ++r) {
      logs_.push_back(log_prefix + ".rank" + std::to_string(r) + ".log");
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::setenv("MASTER_ADDR", "127.0.0.1", 1);
        ::setenv("MASTER_PORT", port.c_str(), 1);
        ::setenv("RANK", std::to_string(r).c_str(), 1);
        ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
        ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
        ::setenv("OMP_NUM_THREADS", "1", 1);
        const int fd = ::open(logs_.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        std::vector<char*> argv{const_cast<char*>(kMemopt.c_str())};
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(kMemopt.c_str(), argv.data());
        ::_exit(127);
      }
      pids_.push_back(pid);
      status_.push_back(-1);
    }
  }
  ~Ranks() {
    for (size_t r = 0; r < pids_.size(); ++r)
      if (status_[r] == -1) {
        ::kill(pids_[r], SIGKILL);
        ::kill(pids_[r], SIGCONT);
        ::waitpid(pids_[r], nullptr, 0);
      }
  }
  pid_t pid(int r) const { return pids_[r]; }
  const std::string& log(int r) const { return logs_[r]; }
  // Waits until rank r has exited or `timeout_s` passed; its exit code, or -1.
  int wait(int r, double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (status_[r] == -1) {
      int st = 0;
      if (::waitpid(pids_[r], &st, WNOHANG) == pids_[r]) {
        status_[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_[r];
  }
  bool wait_all_ok(double timeout_s) {
    bool ok = true;
    for (size_t r = 0; r < pids_.size(); ++r) {
      const int code = wait(static_cast<int>(r), timeout_s);
      if (code != 0) {
        ADD_FAILURE() << "rank " << r << " exited with " << code << ":\n" << slurp(logs_[r]);
        ok = false;
      }
    }
    return ok;
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> status_;
  std::vector<std::string> logs_;
};

class Distributed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(MEMOPT_BINARY_DIR) / "tests" / "distributed" / ("run." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // The tiny GPT-2 (B=4) without dropout, so that every rank computes what one
    // process would; a link so that schedules may offload.
    profile_ = (dir_ / "P.json").string();
    ASSERT_EQ(run_command(kMemopt + " profile --preset tiny --dropout 0 --repeat 1 --threads 1 --link 8GB/s --out " + profile_), 0);
    chunked_profile_ = (dir_ / "P_chunked.json").string();
    ASSERT_EQ(run_command(kMemopt + " profile --preset tiny --dropout 0 --repeat 1 --threads 1 --loss chunked --out " +
                          chunked_profile_), 0);
    offload_ = (dir_ / "offload.json").string();
    ASSERT_EQ(run_command(kMemopt + " solve --profile " + profile_ + " --solver offload-all --budget 100% --out " + offload_), 0);
    ASSERT_EQ(run_command(kMemopt + " plan --profile " + profile_ + " --gpu-memory 1GiB --pipeline-stages 2 --world-size 2 "
                          "--micro-batches 4 --solver offload-all --out " + (dir_ / "pp.json").string()), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Single-process training on the whole batch: the reference.
  static std::vector<at::Tensor> reference(const std::string& profile) {
    const solver::Profile p = solver::read_profile(profile);
    const gpt2::Gpt2Spec spec = gpt2::gpt2_spec_from_json(p.model);
    model::Gpt2 gpt2 = model::make_gpt2(spec);
    model::StagedModel model = model::stage_gpt2(gpt2);
    model.train(true);
    const model::Batch batch = model::make_gpt2_batch(spec);
    std::vector<at::Tensor> params = model.parameters();
    torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(kLr).eps(kEps));
    for (int s = 0; s < kSteps; ++s) {
      adamw.zero_grad();
      model.forward(batch).backward();
      adamw.step();
    }
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : params) out.push_back(t.detach().clone());
    return out;
  }

  // Runs a job and checks every rank's parameters against the reference; returns
  // each rank's result JSON.
  std::vector<nlohmann::json> train_and_compare(int world, std::vector<std::string> extra, const std::string& name,
                                                const std::string& profile = profile_) {
    const std::string out = (dir_ / name).string();
    std::vector<std::string> args{"train", "--profile", profile, "--steps", std::to_string(kSteps), "--lr",
                                  std::to_string(kLr), "--adam-eps", std::to_string(kEps), "--threads", "1",
                                  "--timeout", "60", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    Ranks ranks(world, args, out);
    if (!ranks.wait_all_ok(240)) return {};
    static std::map<std::string, std::vector<at::Tensor>> refs;
    if (!refs.count(profile)) refs[profile] = reference(profile);
    const std::vector<at::Tensor>& ref = refs.at(profile);
    std::vector<nlohmann::json> results;
    std::vector<bool> seen(ref.size(), false);
    double max_diff = 0;
    for (int r = 0; r < world; ++r) {
      const std::string stem = out + ".rank" + std::to_string(r);
      results.push_back(nlohmann::json::parse(slurp(stem + ".json")));
      for (const auto& [key, tensor] : model::read_safetensors(stem + ".safetensors")) {
        const int64_t index = std::stoll(key);
        if (index < 0 || index >= static_cast<int64_t>(ref.size()) || std::to_string(index) != key) {
          ADD_FAILURE() << name << ": rank " << r << " wrote parameter '" << key << "'";
          return {};
        }
        seen[index] = true;
        EXPECT_EQ(tensor.sizes(), ref[index].sizes()) << name << ": parameter " << index;
        const at::Tensor expected = ref[index].flatten();
        const at::Tensor got = tensor.flatten();
        // Note [Distributed tolerance]: each rank sums a different split of the batch,
        // so gradients differ from the reference by float rounding (~1e-7 relative);
        // through 3 AdamW steps of lr 1e-3 the largest parameter difference measured is
        // 1.2e-7 (one float ulp at 1); 2e-6 leaves room and still fails any wrong
        // gradient (Note [Test AdamW eps]).
        const double diff = (got - expected).abs().max().item<double>();
        max_diff = std::max(max_diff, diff);
        EXPECT_LE(diff, 2e-6) << name << ": rank " << r << " parameter " << index;
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "no rank wrote parameter " << i;
    RecordProperty("max_abs_param_diff_" + name, std::to_string(max_diff));
    if (std::getenv("MEMOPT_TEST_VERBOSE")) std::fprintf(stderr, "%s: max |param - reference| = %.3g\n", name.c_str(), max_diff);
    for (nlohmann::json& r : results) r["job"] = name;
    return results;
  }

  void expect_static_bytes_match_plan(const std::vector<nlohmann::json>& results, int world, int zero, int pp, int mb) {
    const solver::Profile p = solver::read_profile(profile_);
    solver::SolveOptions o;
    o.solver = solver::SolverKind::StoreAll;
    const auto plans = solver::plan_distributed(p.chain, {world, zero, pp, mb, p.model.value("batch", int64_t{0})},
                                                int64_t{1} << 34, o, profile_);
    for (const nlohmann::json& r : results) {
      const auto& plan = plans.at(r.at("pipeline_stage").get<int>());
      EXPECT_EQ(r.at("persistent_bytes").get<int64_t>(), plan.zero.persistent_bytes()) << r.at("job") << " rank " << r.at("rank");
      EXPECT_EQ(r.at("engine_persistent_bytes").get<int64_t>(), plan.zero.persistent_bytes()) << r.at("job");
    }
  }

  static inline fs::path dir_;
  static inline std::string profile_, chunked_profile_, offload_;
};

// ZeRO-3 gathers the buckets a stage reads around every forward op (first runs and
// recomputations) and every backward op of the schedule, per micro-batch and step.
int64_t expected_gathers(const solver::Chain& chain, const std::vector<solver::Op>& ops, int micro_batches) {
  const solver::ZeroBuckets z = solver::zero_buckets(chain, "test");
  int64_t n = 0;
  for (const solver::Op& op : ops)
    if (op.kind == solver::OpKind::FwdKeep || op.kind == solver::OpKind::FwdCkpt ||
        op.kind == solver::OpKind::FwdDrop || op.kind == solver::OpKind::Bwd)
      n += static_cast<int64_t>(z.reads[op.index].size());
  return n * micro_batches * kSteps;
}

TEST_F(Distributed, ZeroStagesAtWorldSize2) {
  for (int k = 0; k <= 3; ++k) {
    const auto results = train_and_compare(2, {"--zero-stage", std::to_string(k)}, "w2z" + std::to_string(k));
    ASSERT_EQ(results.size(), 2u);
    expect_static_bytes_match_plan(results, 2, k, 1, 1);
    const solver::Chain chain = solver::read_profile(profile_).chain;
    for (const auto& r : results)
      EXPECT_EQ(r.at("num_gathers").get<int64_t>(), k == 3 ? expected_gathers(chain, solver::store_all_ops(chain), 1) : 0);
  }
}

TEST_F(Distributed, ZeroStagesAtWorldSize2WithRecomputeAndOffload) {
  for (int k = 1; k <= 3; ++k) {
    const auto results =
        train_and_compare(2, {"--zero-stage", std::to_string(k), "--schedule", offload_}, "w2z" + std::to_string(k) + "off");
    ASSERT_EQ(results.size(), 2u);
    expect_static_bytes_match_plan(results, 2, k, 1, 1);
    if (k == 3) {
      const solver::Schedule s = solver::read_schedule(offload_);
      // The schedule recomputes and offloads; each recomputation gathers again.
      EXPECT_TRUE(std::any_of(s.ops.begin(), s.ops.end(), [](const solver::Op& op) { return op.kind == solver::OpKind::Offload; }));
      EXPECT_GT(std::count_if(s.ops.begin(), s.ops.end(), [](const solver::Op& op) { return op.kind != solver::OpKind::Bwd && op.kind != solver::OpKind::Loss && op.kind != solver::OpKind::Offload && op.kind != solver::OpKind::Prefetch; }),
                solver::read_profile(profile_).chain.length());
      for (const auto& r : results)
        EXPECT_EQ(r.at("num_gathers").get<int64_t>(), expected_gathers(solver::read_profile(profile_).chain, s.ops, 1));
    }
  }
}

// The chunked loss adds wte's gradients into wte.grad in place when it exists (ZeRO
// 0 and 1 keep gradients allocated) and returns them otherwise (ZeRO-2 and 3 release
// them after each stage): every stage trains as one process does, and 1F1B too.
TEST_F(Distributed, ZeroStagesAndPipelineWithTheChunkedLoss) {
  for (int k = 0; k <= 3; ++k) {
    const auto results = train_and_compare(2, {"--zero-stage", std::to_string(k)}, "chunked_z" + std::to_string(k),
                                           chunked_profile_);
    ASSERT_EQ(results.size(), 2u);
  }
  const auto pp = train_and_compare(2, {"--pipeline-stages", "2", "--micro-batches", "4"}, "chunked_pp",
                                    chunked_profile_);
  ASSERT_EQ(pp.size(), 2u);
}

TEST_F(Distributed, ZeroStagesAtWorldSize4) {
  for (int k = 1; k <= 3; ++k) {
    const std::vector<std::string> extra = k == 3 ? std::vector<std::string>{"--zero-stage", "3", "--schedule", offload_}
                                                  : std::vector<std::string>{"--zero-stage", std::to_string(k)};
    const auto results = train_and_compare(4, extra, "w4z" + std::to_string(k));
    ASSERT_EQ(results.size(), 4u);
    expect_static_bytes_match_plan(results, 4, k, 1, 1);
  }
}

TEST_F(Distributed, PipelineOf2StagesWith4MicroBatches) {
  const auto plain = train_and_compare(2, {"--pipeline-stages", "2", "--micro-batches", "4"}, "pp");
  ASSERT_EQ(plain.size(), 2u);
  expect_static_bytes_match_plan(plain, 2, 0, 2, 4);
  // 1F1B: stage k holds at most P - k micro-batches.
  EXPECT_EQ(plain[0].at("max_in_flight"), 2);
  EXPECT_EQ(plain[1].at("max_in_flight"), 1);
  const std::string s0 = (dir_ / "pp.stage0.json").string(), s1 = (dir_ / "pp.stage1.json").string();
  const auto scheduled = train_and_compare(
      2, {"--pipeline-stages", "2", "--micro-batches", "4", "--zero-stage", "3", "--schedule", s0, "--schedule", s1},
      "ppsched");
  ASSERT_EQ(scheduled.size(), 2u);
  expect_static_bytes_match_plan(scheduled, 2, 3, 2, 4);
}

bool moves_saved_state(const solver::Schedule& s) {
  return std::any_of(s.ops.begin(), s.ops.end(), [](const solver::Op& op) { return op.kind == solver::OpKind::OffloadSaved; }) &&
         std::any_of(s.ops.begin(), s.ops.end(), [](const solver::Op& op) { return op.kind == solver::OpKind::PrefetchSaved; });
}

// The device memory per rank that leaves each pipeline stage `fraction` of its
// store-all activation peak per micro-batch in flight, so that `memopt plan`'s default
// solver (optimal) has to recompute or offload.
int64_t tight_device_bytes(const std::string& profile, int world, int zero, int pp, int mb, double fraction) {
  const solver::Profile p = solver::read_profile(profile);
  solver::SolveOptions o;
  o.solver = solver::SolverKind::StoreAll;
  const auto plans = solver::plan_distributed(p.chain, {world, zero, pp, mb, p.model.value("batch", int64_t{0})},
                                              int64_t{1} << 34, o, profile);
  int64_t device = 0;
  for (const auto& plan : plans)
    device = std::max(device, plan.zero.static_bytes() +
                                  static_cast<int64_t>(fraction * static_cast<double>(plan.schedule.predicted.peak_bytes)) *
                                      plan.in_flight);
  return device;
}

// Writes `memopt plan`'s default (optimal) schedules for a device that leaves each
// pipeline stage a fraction of its store-all peak per micro-batch in flight, trying
// fractions from tight to loose until a plan moves saved state (which plan the DP
// picks depends on the measured times). Returns the schedule paths, or none.
std::vector<std::string> plan_moving_saved_state(const std::string& memopt, const std::string& profile,
                                                 const fs::path& dir, int world, int zero, int pp, int mb) {
  for (const double fraction : {0.4, 0.5, 0.6, 0.7, 0.8, 0.9}) {
    const std::string out = (dir / ("opt_" + std::to_string(pp) + "_" + std::to_string(fraction) + ".json")).string();
    const std::string command = memopt + " plan --profile " + profile + " --gpu-memory " +
                                std::to_string(tight_device_bytes(profile, world, zero, pp, mb, fraction)) +
                                " --world-size " + std::to_string(world) + " --zero-stage " + std::to_string(zero) +
                                " --pipeline-stages " + std::to_string(pp) + " --micro-batches " + std::to_string(mb) +
                                " --out " + out;
    if (run_command(command) != 0) continue;  // too tight for any plan
    std::vector<std::string> paths;
    bool moves = false;
    for (int k = 0; k < pp; ++k) {
      paths.push_back(pp == 1 ? out : out.substr(0, out.size() - 5) + ".stage" + std::to_string(k) + ".json");
      const solver::Schedule s = solver::read_schedule(paths.back());
      EXPECT_EQ(s.solver, "optimal");
      moves |= moves_saved_state(s);
    }
    if (moves) return paths;
  }
  return {};
}

// The plans `memopt plan` writes by default train as written: optimal schedules that
// offload saved state (offload_saved / prefetch_saved) run on copy engines and host
// pools sized as `memopt run` sizes its one, under ZeRO and under the pipeline.
TEST_F(Distributed, DefaultOptimalPlansWithSavedStateOffloadTrain) {
  const std::vector<std::string> z3 = plan_moving_saved_state(kMemopt, profile_, dir_, 2, 3, 1, 1);
  ASSERT_EQ(z3.size(), 1u) << "no ZeRO-3 plan moved saved state at 40-90% of store-all";
  for (int k : {0, 3}) {
    const auto results = train_and_compare(2, {"--zero-stage", std::to_string(k), "--schedule", z3[0]}, "opt_z" + std::to_string(k));
    ASSERT_EQ(results.size(), 2u);
    expect_static_bytes_match_plan(results, 2, k, 1, 1);
  }
  const std::vector<std::string> pp = plan_moving_saved_state(kMemopt, profile_, dir_, 2, 0, 2, 4);
  ASSERT_EQ(pp.size(), 2u) << "no pipeline plan moved saved state at 40-90% of store-all";
  const auto results = train_and_compare(
      2, {"--pipeline-stages", "2", "--micro-batches", "4", "--schedule", pp[0], "--schedule", pp[1]}, "opt_pp");
  ASSERT_EQ(results.size(), 2u);
  expect_static_bytes_match_plan(results, 2, 0, 2, 4);
}

// A rank killed (dies) or stopped (hangs) mid-training: the other exits non-zero
// within the timeout with an error naming the failure, and writes nothing.
void fault(const std::string& dir, const std::string& profile, int signal_number, const std::string& name) {
  const std::string out = dir + "/" + name;
  Ranks ranks(2, {"train", "--profile", profile, "--steps", "100000", "--threads", "1", "--timeout", "5", "--out", out},
              out);
  // Let training start: rank 0 reports steps.
  const auto start = std::chrono::steady_clock::now();
  while (slurp(ranks.log(0)).find("step 2/") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120)) << slurp(ranks.log(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(ranks.pid(1), signal_number);
  const auto killed = std::chrono::steady_clock::now();
  const int code = ranks.wait(0, 30);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_NE(code, -1) << "rank 0 still runs 30 s after its peer failed (timeout 5 s)";
  EXPECT_NE(code, 0);
  EXPECT_LT(waited, 20.0);
  const std::string log = slurp(ranks.log(0));
  EXPECT_NE(log.find("rank 0/2"), std::string::npos) << "exit code " << code << "\n" << log;
  EXPECT_NE(log.find("another rank probably died or hung"), std::string::npos) << "exit code " << code << "\n" << log;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string f = entry.path().filename().string();
    const bool result = f.rfind(name + ".rank", 0) == 0 && !f.ends_with(".log");
    EXPECT_FALSE(result) << "left behind: " << f;
  }
}

// Note [A dead peer is an error, not a signal]: once this process has joined a
// group, writing to a socket whose other end is gone fails with EPIPE instead of
// ending the process. (A racing Gloo write is what the dead-rank test would hit
// only now and then; here the write is certain.)
TEST(Comm, WritingToADeadPeerFailsInsteadOfEndingTheProcess) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &before), 0);
  ASSERT_EQ(before.sa_handler, SIG_DFL) << "the test needs the default disposition to start from";
  LaunchEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = free_port();
  const std::shared_ptr<Comm> comm = Comm::connect(env, CommOptions{std::chrono::seconds(10)});
  int ends[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
  ::close(ends[1]);
  const char byte = 1;
  errno = 0;
  EXPECT_EQ(::write(ends[0], &byte, 1), -1);  // the default SIGPIPE would end the test here
  EXPECT_EQ(errno, EPIPE);
  ::close(ends[0]);
  ::sigaction(SIGPIPE, &before, nullptr);
}

TEST_F(Distributed, DeadRankFailsTheOthers) { fault(dir_.string(), profile_, SIGKILL, "dies"); }
TEST_F(Distributed, HungRankFailsTheOthers) { fault(dir_.string(), profile_, SIGSTOP, "hangs"); }

}  // namespace
}  // namespace memopt::distributed

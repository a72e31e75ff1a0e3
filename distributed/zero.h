// zero.h: ZeRO data parallelism (Rajbhandari et al. 2020) for a StagedModel, as
// executor hooks -- so that memopt's schedule (recompute, offload) runs inside it.
//   stage 0: plain data parallel (all-reduce gradients, every rank updates all)
//   stage 1: AdamW state partitioned across ranks
//   stage 2: + gradients reduce-scattered into partitions as backward completes them
//   stage 3: + parameters partitioned, all-gathered around every forward (first runs
//            and recomputations) and backward of the stage that reads them, freed after
// Memory layout: Note [ZeRO buckets] in solver/distributed/zero_memory.h, which `memopt plan`
// computes without LibTorch; persistent_bytes() here must equal it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "distributed/comm.h"
#include "distributed/flat_adamw.h"
#include "model/staged_model.h"
#include "runtime/executor.h"

namespace memopt::distributed {

class ZeroEngine final : public runtime::StageHooks {
 public:
  // Re-lays the model's parameters out as flat buckets (their values kept) and
  // allocates gradients and AdamW state as the stage says. Every rank of `dp` must
  // hold the same parameter values (same seed or weights).
  ZeroEngine(const model::StagedModel& model, std::shared_ptr<Comm> dp, int zero_stage, const AdamWConfig& adamw);
  ~ZeroEngine() override;

  // Before a step's first micro-batch: zero the gradient accumulators.
  void begin_step();
  // After its last micro-batch: reduce what is left to reduce, AdamW on the owned
  // partitions, and bring every rank's parameters up to date.
  void finish_step();

  void before_forward(int stage) override;
  void after_forward(int stage) override;
  void before_backward(int stage) override;
  void after_backward(int stage) override;

  // The summed gradient of parameter k (model.parameters() order) between the last
  // backward and finish_step, as a view that may be changed in place -- for pipeline
  // engines that sum tied parameters across pipeline stages. Only when every rank
  // holds every gradient element (world size 1, or stages 0-1).
  at::Tensor accumulated_grad(int k);

  // Copies of every parameter, full (gathered under stage 3), in model order.
  std::vector<at::Tensor> full_parameters();
  // What the engine keeps between steps: parameters, gradients, AdamW state (bytes).
  int64_t persistent_bytes() const;
  int zero_stage() const { return stage_; }
  // Stage 3: how many bucket all-gathers ran (each forward and backward of a stage
  // gathers the buckets it reads), for tests and reports.
  int64_t num_gathers() const { return num_gathers_; }

 private:
  struct Bucket;
  void gather(int b);
  void release(int b);
  void reduce_scatter_grads(int b);

  const model::StagedModel& model_;
  std::shared_ptr<Comm> dp_;
  int stage_;
  std::vector<at::Tensor> params_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  // per chain stage (may be empty)
  std::vector<std::vector<int>> reads_;           // per chain stage: buckets it reads
  std::vector<int> bucket_of_, offset_of_;        // per parameter
  int64_t num_gathers_ = 0;
};

}  // namespace memopt::distributed

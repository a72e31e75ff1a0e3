// pipeline.cpp: 1F1B over c10d send/recv.
#include "distributed/pipeline.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include <ATen/ATen.h>

namespace memopt::distributed {
namespace {

// Tags per micro-batch m: the activation's shape, the activation, its gradient.
int tag(int m, int kind) { return 3 * m + kind; }
constexpr int kMaxDims = 7;

struct InFlight {
  int m = 0;
  model::Batch batch;
  std::unique_ptr<runtime::ScheduleRunner> runner;
  std::vector<int64_t> out_sizes;
  runtime::CpuCopyEngine* engine = nullptr;
};

}  // namespace

PipelineStepResult run_1f1b(const PipelineStage& st, const std::vector<model::Batch>& micro_batches) {
  const int M = static_cast<int>(micro_batches.size()), P = st.size, k = st.rank;
  if (P > 1 && !st.group) throw std::invalid_argument("run_1f1b: a pipeline of several stages needs a group");
  PipelineStepResult result;
  std::deque<std::unique_ptr<InFlight>> in_flight;
  std::vector<runtime::CpuCopyEngine*> free_engines(st.copy_engines.rbegin(), st.copy_engines.rend());

  const auto forward = [&](int m) {
    auto f = std::make_unique<InFlight>();
    f->m = m;
    f->batch = micro_batches[m];
    if (k > 0) {
      at::Tensor header = at::empty({kMaxDims + 1}, at::kLong);
      st.group->recv(header, k - 1, tag(m, 0));
      const int64_t* h = header.data_ptr<int64_t>();
      if (h[0] < 0 || h[0] > kMaxDims) throw std::logic_error("run_1f1b: a malformed activation header");
      std::vector<int64_t> sizes(h + 1, h + 1 + h[0]);
      at::Tensor act = at::empty(sizes);
      st.group->recv(act, k - 1, tag(m, 1));
      f->batch.input = act;
    }
    runtime::ExecutorOptions options;
    options.hooks = st.hooks;
    if (!st.copy_engines.empty()) {
      if (free_engines.empty()) throw std::logic_error("run_1f1b: more micro-batches in flight than copy engines");
      f->engine = free_engines.back();
      free_engines.pop_back();
      options.copy_engine = f->engine;
      options.offload_done_before = st.offload_done_before;
    }
    f->runner = std::make_unique<runtime::ScheduleRunner>(*st.model, st.ops, options);
    // The runner owns the micro-batch (and a_0 with it) until its backward.
    const at::Tensor out = f->runner->run_forward(std::move(f->batch));
    f->out_sizes = out.sizes().vec();
    if (k < P - 1) {
      if (out.dim() > kMaxDims) throw std::invalid_argument("run_1f1b: stage outputs of more than 7 dimensions");
      at::Tensor header = at::zeros({kMaxDims + 1}, at::kLong);
      int64_t* h = header.data_ptr<int64_t>();
      h[0] = out.dim();
      for (int64_t d = 0; d < out.dim(); ++d) h[d + 1] = out.size(d);
      st.group->isend(header, k + 1, tag(m, 0));
      st.group->isend(out.contiguous(), k + 1, tag(m, 1));
    } else {
      result.loss_sum += out.item<double>();
    }
    in_flight.push_back(std::move(f));
    result.max_in_flight = std::max(result.max_in_flight, static_cast<int>(in_flight.size()));
  };

  const auto backward = [&] {
    std::unique_ptr<InFlight> f = std::move(in_flight.front());
    in_flight.pop_front();
    at::Tensor grad;
    if (k == P - 1) {
      grad = at::full(f->out_sizes, st.loss_scale);
    } else {
      grad = at::empty(f->out_sizes);
      st.group->recv(grad, k + 1, tag(f->m, 2));
    }
    const at::Tensor d0 = f->runner->run_backward(grad);
    if (k > 0) {
      if (!d0.defined()) throw std::logic_error("run_1f1b: no gradient for the received activation");
      st.group->isend(d0.contiguous(), k - 1, tag(f->m, 2));
    }
    if (f->engine) free_engines.push_back(f->engine);
  };

  const int warmup = std::min(P - k - 1, M);
  int next = 0;
  for (; next < warmup; ++next) forward(next);
  for (; next < M; ++next) {
    forward(next);
    backward();
  }
  while (!in_flight.empty()) backward();
  if (st.group) st.group->wait_sends();
  return result;
}

}  // namespace memopt::distributed

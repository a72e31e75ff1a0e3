// zero.cpp: ZeroEngine.
#include "distributed/zero.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

namespace memopt::distributed {

// Note [Freeing a gathered bucket]: a stage-3 bucket's parameters are views into one
// flat storage. Releasing empties that storage in place (its data pointer is freed,
// its size set to 0) instead of dropping the tensors, because autograd's saved
// views of the weights (linear saves weight.t()) point at the same storage: a
// backward re-gathers into it and they see the values again -- as PyTorch's FSDP
// does with storage resizing.
struct ZeroEngine::Bucket {
  std::vector<int> params;  // indices into params_
  int64_t numel = 0;        // n_b
  int64_t padded = 0;       // P_b
  int64_t shard = 0;        // S_b
  at::Tensor flat;          // P_b parameters (a storage emptied between uses under stage 3)
  at::Tensor flat_grad;     // stages 0-1: P_b gradients, the parameters' .grad views into it
  at::Tensor owned;         // stage 3: the S_b owned parameters (master copy)
  at::Tensor owned_grad;    // stages 2-3: S_b reduced gradients
  std::unique_ptr<FlatAdamW> adamw;
  int gathered = 0;         // stage 3: open uses
};

namespace {

void free_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

void restore_storage(const at::Tensor& t, int64_t nbytes) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(s->allocator()->allocate(static_cast<size_t>(nbytes)));
  s->set_nbytes(static_cast<size_t>(nbytes));
}

}  // namespace

ZeroEngine::ZeroEngine(const model::StagedModel& model, std::shared_ptr<Comm> dp, int zero_stage, const AdamWConfig& adamw)
    : model_(model), dp_(std::move(dp)), stage_(zero_stage) {
  if (stage_ < 0 || stage_ > 3) throw std::invalid_argument("--zero-stage: must be 0, 1, 2 or 3");
  const int D = dp_->size(), r = dp_->rank();
  params_ = model.parameters();
  for (const at::Tensor& p : params_)
    if (p.scalar_type() != at::kFloat || !p.is_contiguous())
      throw std::invalid_argument("ZeRO: parameters must be contiguous float32");
  const model::ParameterHomes homes = model::parameter_homes(model);
  bucket_of_.assign(params_.size(), -1);
  offset_of_.assign(params_.size(), 0);
  const int L = model.num_stages();
  reads_.resize(L);
  at::NoGradGuard no_grad;
  for (int b = 0; b < L; ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->params = homes.homed[b];
    for (const int k : bucket->params) {
      bucket_of_[k] = b;
      offset_of_[k] = static_cast<int>(bucket->numel);
      bucket->numel += params_[k].numel();
    }
    bucket->padded = (bucket->numel + D - 1) / D * D;
    bucket->shard = bucket->padded / D;
    if (bucket->numel > 0) {
      bucket->flat = at::zeros({bucket->padded});
      for (const int k : bucket->params) {
        at::Tensor& p = params_[k];
        at::Tensor view = bucket->flat.narrow(0, offset_of_[k], p.numel()).view(p.sizes());
        view.copy_(p);
        p.set_data(view);  // the module sees the same Parameter, now a view of the bucket
      }
      const int64_t opt_numel = stage_ == 0 ? bucket->padded : bucket->shard;
      bucket->adamw = std::make_unique<FlatAdamW>(opt_numel, adamw);
      if (stage_ <= 1) {
        bucket->flat_grad = at::zeros({bucket->padded});
        for (const int k : bucket->params)
          params_[k].mutable_grad() = bucket->flat_grad.narrow(0, offset_of_[k], params_[k].numel()).view(params_[k].sizes());
      } else {
        bucket->owned_grad = at::zeros({bucket->shard});
        for (const int k : bucket->params) params_[k].mutable_grad().reset();
      }
      if (stage_ == 3) {
        bucket->owned = bucket->flat.narrow(0, r * bucket->shard, bucket->shard).clone();
        free_storage(bucket->flat);
      }
    }
    buckets_.push_back(std::move(bucket));
  }
  for (int i = 0; i < L; ++i) {
    if (buckets_[i]->numel > 0) reads_[i].push_back(i);
    for (const int k : homes.foreign_reads[i]) {
      const int b = homes.home[k];
      if (std::find(reads_[i].begin(), reads_[i].end(), b) == reads_[i].end()) reads_[i].push_back(b);
    }
  }
}

ZeroEngine::~ZeroEngine() = default;

int64_t ZeroEngine::persistent_bytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) {
    if (b->numel == 0) continue;
    if (stage_ < 3) bytes += static_cast<int64_t>(b->flat.nbytes());
    if (b->flat_grad.defined()) bytes += static_cast<int64_t>(b->flat_grad.nbytes());
    if (b->owned.defined()) bytes += static_cast<int64_t>(b->owned.nbytes());
    if (b->owned_grad.defined()) bytes += static_cast<int64_t>(b->owned_grad.nbytes());
    bytes += b->adamw->state_bytes();
  }
  return bytes;
}

void ZeroEngine::gather(int b) {
  Bucket& k = *buckets_[b];
  if (k.gathered++ > 0) return;
  ++num_gathers_;
  restore_storage(k.flat, k.padded * static_cast<int64_t>(sizeof(float)));
  dp_->all_gather(k.flat, k.owned);
}

void ZeroEngine::release(int b) {
  Bucket& k = *buckets_[b];
  if (--k.gathered > 0) return;
  free_storage(k.flat);
}

void ZeroEngine::before_forward(int stage) {
  if (stage_ == 3)
    for (const int b : reads_[stage]) gather(b);
}

void ZeroEngine::after_forward(int stage) {
  if (stage_ == 3)
    for (const int b : reads_[stage]) release(b);
}

void ZeroEngine::before_backward(int stage) { before_forward(stage); }

void ZeroEngine::after_backward(int stage) {
  after_forward(stage);
  // Note [Parameter homes]: the gradients of the parameters homed here are complete.
  if (stage_ >= 2 && buckets_[stage]->numel > 0) reduce_scatter_grads(stage);
}

void ZeroEngine::reduce_scatter_grads(int b) {
  Bucket& k = *buckets_[b];
  at::NoGradGuard no_grad;
  at::Tensor flat = at::zeros({k.padded});
  for (const int i : k.params) {
    at::Tensor& g = params_[i].mutable_grad();
    if (g.defined()) flat.narrow(0, offset_of_[i], params_[i].numel()).copy_(g.reshape({-1}));
    g.reset();  // the full gradient leaves the device; the partition holds the sum
  }
  at::Tensor out = at::empty({k.shard});
  dp_->reduce_scatter_sum(out, flat);
  flat.reset();
  k.owned_grad.add_(out);
}

void ZeroEngine::begin_step() {
  for (auto& b : buckets_) {
    if (b->flat_grad.defined()) b->flat_grad.zero_();
    if (b->owned_grad.defined()) b->owned_grad.zero_();
  }
}

at::Tensor ZeroEngine::accumulated_grad(int k) {
  Bucket& b = *buckets_[bucket_of_[k]];
  const at::Tensor& p = params_[k];
  if (b.flat_grad.defined()) return b.flat_grad.narrow(0, offset_of_[k], p.numel()).view(p.sizes());
  if (dp_->size() != 1) throw std::logic_error("ZeRO: accumulated_grad of a partitioned gradient");
  return b.owned_grad.narrow(0, offset_of_[k], p.numel()).view(p.sizes());
}

void ZeroEngine::finish_step() {
  const int r = dp_->rank();
  at::NoGradGuard no_grad;
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    if (b.numel == 0) continue;
    if (stage_ <= 1 && dp_->size() > 1) dp_->all_reduce_sum(b.flat_grad);
    if (stage_ == 0) {
      b.adamw->step(b.flat, b.flat_grad);
      continue;
    }
    if (stage_ == 3) {
      b.adamw->step(b.owned, b.owned_grad);
      continue;
    }
    at::Tensor mine = b.flat.narrow(0, r * b.shard, b.shard);
    const at::Tensor grad = stage_ == 1 ? b.flat_grad.narrow(0, r * b.shard, b.shard) : b.owned_grad;
    b.adamw->step(mine, grad);
    if (dp_->size() > 1) {
      const at::Tensor sent = mine.clone();
      dp_->all_gather(b.flat, sent);
    }
  }
}

std::vector<at::Tensor> ZeroEngine::full_parameters() {
  std::vector<at::Tensor> out(params_.size());
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (buckets_[b]->numel == 0) continue;
    if (stage_ == 3) gather(static_cast<int>(b));
    for (const int k : buckets_[b]->params) out[k] = params_[k].detach().clone();
    if (stage_ == 3) release(static_cast<int>(b));
  }
  return out;
}

}  // namespace memopt::distributed

// storage_move.cpp: Note [Moving bytes from under their holders].
#include "runtime/storage_move.h"

#include <chrono>
#include <stdexcept>
#include <unordered_set>

#include <ATen/ops/empty.h>

namespace memopt::runtime {

StorageMove::StorageMove(const std::vector<at::Tensor>& tensors, CopyEngine& engine) {
  std::unordered_set<const void*> seen;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !seen.insert(t.storage().unsafeGetStorageImpl()).second) continue;
    const int64_t nbytes = static_cast<int64_t>(t.storage().nbytes());
    // The whole storage as flat bytes: views of it at any offset come back intact.
    const at::Tensor flat = at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {nbytes}, {1});
    moved_.push_back({t.storage(), engine.offload(flat), nullptr});
  }
}

void StorageMove::release() {
  if (released_) return;
  for (const Moved& m : moved_) m.out->wait();
  for (Moved& m : moved_) m.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(at::DataPtr(nullptr, m.storage.device()));
  released_ = true;
}

void StorageMove::prefetch(CopyEngine& engine) {
  for (Moved& m : moved_) {
    if (m.back) throw std::logic_error("memopt: prefetch_input of storages already coming back");
    m.back = engine.prefetch(m.out);
  }
}

double StorageMove::restore() {
  const auto start = std::chrono::steady_clock::now();
  release();
  for (Moved& m : moved_) {
    if (!m.back) throw std::logic_error("memopt: a kept stage's input is needed but was never prefetched");
    const at::Tensor fresh = m.back->take_device_tensor();
    at::DataPtr bytes = fresh.storage().unsafeGetStorageImpl()->set_data_ptr(at::DataPtr(nullptr, fresh.device()));
    m.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(bytes));
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::shared_ptr<Transfer>> StorageMove::transfers() const {
  std::vector<std::shared_ptr<Transfer>> out;
  for (const Moved& m : moved_) {
    out.push_back(m.out);
    if (m.back) out.push_back(m.back);
  }
  return out;
}

}  // namespace memopt::runtime

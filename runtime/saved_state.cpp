// saved_state.cpp: Note [Capturing saved tensors from C++].
#include "runtime/saved_state.h"

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

namespace memopt::runtime {

// One storage a stage saved: on the device (`device`), or on its way out or back.
struct Slot {
  at::Tensor device;                    // the whole storage as flat bytes, while resident
  std::shared_ptr<Transfer> offloaded;  // the copy to the host
  std::shared_ptr<Transfer> arriving;   // the copy back
  bool stays = false;                   // input, output or static: never moves
};

struct SavedState::Impl {
  std::shared_ptr<const std::unordered_set<const void*>> static_storages;
  c10::Device compute_device{c10::kCPU};
  std::unordered_map<const void*, std::shared_ptr<Slot>> by_storage;
  std::vector<std::shared_ptr<Slot>> slots;  // in capture order
  std::vector<std::shared_ptr<Transfer>> transfers;

  std::shared_ptr<Slot> slot_of(const at::Tensor& t) {
    const void* key = t.storage().unsafeGetStorageImpl();
    auto it = by_storage.find(key);
    if (it != by_storage.end()) return it->second;
    auto slot = std::make_shared<Slot>();
    const int64_t nbytes = static_cast<int64_t>(t.storage().nbytes());
    slot->device = at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {nbytes}, {1});
    // Note [Host scalars stay]
    // On a GPU, sdpa's memory-efficient and flash kernels save their Philox seed and
    // offset as CPU scalars. They are not device memory (the budget never counted
    // them) and a copy engine moves device tensors only, so whatever a graph saved
    // off its compute device stays where it is.
    slot->stays = (static_storages && static_storages->count(key) > 0) || t.device() != compute_device;
    by_storage.emplace(key, slot);
    slots.push_back(slot);
    return slot;
  }
};

namespace {

thread_local std::shared_ptr<SavedState::Impl> t_capturing;

// Note [Tensors with no memory of their own]
// A compiled stage (the Python package's compile_stages) may be traced for the first
// time inside a step, while its saved state is being captured: AOTAutograd then runs
// the stage's autograd graph on fake tensors, whose saves reach these hooks too. They
// have no device memory to count or move, and a copy engine cannot read them, so a
// tensor that is fake, functional, meta or without storage is held as it is, outside
// the slots, and handed back unchanged (has_own_memory in copy_engine.h).

// One saved tensor: a view into its slot, rebuilt on unpack from whatever storage the
// slot holds then.
class Hooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit Hooks(std::shared_ptr<SavedState::Impl> state) : state_(std::move(state)) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    if (!has_own_memory(tensor)) {  // Note [Tensors with no memory of their own]
      held_ = tensor;
      state_.reset();
      return;
    }
    slot_ = state_->slot_of(tensor);
    options_ = tensor.options();
    sizes_ = tensor.sizes().vec();
    strides_ = tensor.strides().vec();
    offset_ = tensor.storage_offset();
    state_.reset();  // the slot is all a hook needs; the state may die first
  }
  at::Tensor call_unpack_hook() override {
    if (held_.defined()) return held_;
    const at::Tensor& base = slot_->device;
    if (!base.defined())
      throw std::logic_error("memopt: a saved tensor was unpacked while its stage's saved state is on the host "
                             "(a schedule ran bwd without prefetch_saved)");
    return at::empty({0}, options_).set_(base.storage(), offset_, sizes_, strides_);
  }

 private:
  std::shared_ptr<SavedState::Impl> state_;
  std::shared_ptr<Slot> slot_;
  at::Tensor held_;  // a tensor with no memory of its own, kept as it is
  at::TensorOptions options_;
  std::vector<int64_t> sizes_, strides_;
  int64_t offset_ = 0;
};

class MemoptEngine final : public torch::autograd::Engine {
 public:
  // The engine that was the default before this one (Python's, in a Python process).
  static torch::autograd::Engine*& replaced() {
    static torch::autograd::Engine* engine = nullptr;
    return engine;
  }
  static Engine& get() {
    static MemoptEngine engine;
    return engine;
  }
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (t_capturing) return std::make_unique<Hooks>(t_capturing);
    return replaced()->get_default_saved_variable_hooks();
  }
  // Note [One engine runs every graph]
  // This engine only answers for hooks; graphs run in the engine it replaced.
  // Engines keep their worker threads and per-thread state apart, so a backward that
  // memopt's executor starts from inside another engine's backward (Python's
  // loss.backward() reaching the schedule's custom function, on a GPU on that
  // engine's device thread) would wait, as a reentrant call on a thread this engine
  // never started, for work queued to threads of its own: possibly for ever. Run by
  // the engine that owns the calling thread, the nested backward is an ordinary
  // reentrant one.
  torch::autograd::variable_list execute(const torch::autograd::edge_list& roots,
                                         const torch::autograd::variable_list& inputs, bool keep_graph,
                                         bool create_graph, bool accumulate_grad,
                                         const torch::autograd::edge_list& outputs) override {
    return replaced()->execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
  }
  std::unique_ptr<torch::autograd::AnomalyMetadata> make_anomaly_metadata() override {
    return replaced()->make_anomaly_metadata();
  }
};

}  // namespace

void install_saved_state_engine() {
  static std::once_flag once;
  std::call_once(once, [] {
    MemoptEngine::replaced() = &torch::autograd::Engine::get_default_engine();
    torch::autograd::set_default_engine_stub(&MemoptEngine::get);
  });
}

SavedState::SavedState(std::shared_ptr<const std::unordered_set<const void*>> static_storages,
                       c10::Device compute_device)
    : impl_(std::make_shared<Impl>()) {
  impl_->static_storages = std::move(static_storages);
  impl_->compute_device = compute_device;
}

SavedState::~SavedState() = default;

void SavedState::keep_on_device(const at::Tensor& tensor) {
  if (!tensor.defined()) return;
  auto it = impl_->by_storage.find(tensor.storage().unsafeGetStorageImpl());
  if (it != impl_->by_storage.end()) it->second->stays = true;
}

int64_t SavedState::movable_bytes() const {
  int64_t n = 0;
  for (const auto& s : impl_->slots)
    if (!s->stays && s->device.defined()) n += s->device.numel();
  return n;
}

int SavedState::num_movable_storages() const {
  int n = 0;
  for (const auto& s : impl_->slots) n += !s->stays;
  return n;
}

std::vector<OutboundCopy> SavedState::offload(CopyEngine& engine) {
  std::vector<OutboundCopy> out;
  for (const auto& s : impl_->slots) {
    if (s->stays) continue;
    if (!s->device.defined()) throw std::logic_error("memopt: offload_saved of a saved state already on the host");
    s->offloaded = engine.offload(s->device);
    impl_->transfers.push_back(s->offloaded);
    out.push_back({std::move(s->device), s->offloaded});  // the engine holds it until its copy ends
    s->device = at::Tensor();
  }
  return out;
}

void SavedState::prefetch(CopyEngine& engine) {
  for (const auto& s : impl_->slots) {
    if (s->stays) continue;
    if (!s->offloaded) throw std::logic_error("memopt: prefetch_saved of a saved state that was not offloaded");
    s->arriving = engine.prefetch(s->offloaded);
    impl_->transfers.push_back(s->arriving);
    s->offloaded.reset();
  }
}

double SavedState::wait_on_device() {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& s : impl_->slots) {
    if (!s->arriving) continue;
    s->device = s->arriving->take_device_tensor();
    s->arriving.reset();
  }
  // From now on only the hooks hold the slots: autograd frees each saved tensor as
  // soon as the node that used it has run (release_variables), as it would without
  // hooks, instead of all of them when the stage's backward ends.
  impl_->slots.clear();
  impl_->by_storage.clear();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

const std::vector<std::shared_ptr<Transfer>>& SavedState::transfers() const { return impl_->transfers; }

CaptureScope::CaptureScope(SavedState& state) : previous_(t_capturing) { t_capturing = state.impl_; }
CaptureScope::~CaptureScope() { t_capturing = previous_; }

std::shared_ptr<const std::unordered_set<const void*>> static_storages_of(const std::vector<at::Tensor>& tensors) {
  auto set = std::make_shared<std::unordered_set<const void*>>();
  for (const at::Tensor& t : tensors)
    if (t.defined()) set->insert(t.storage().unsafeGetStorageImpl());
  return set;
}

}  // namespace memopt::runtime

// thread_ranges.cpp: one global ATen RecordFunction callback.
#include "measure/thread_ranges.h"

#include <ATen/record_function.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace memopt::measure {

struct ThreadRanges::State {
  std::function<void(uint64_t)> push;
  std::function<void()> pop;
  std::atomic<uint64_t> open_id{0};
};

namespace {

// The callbacks are plain functions (RecordFunction's interface), so the one live
// ThreadRanges is reached through here.
std::mutex g_mutex;
std::shared_ptr<ThreadRanges::State> g_state;

std::shared_ptr<ThreadRanges::State> current() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_state;
}

struct Pushed final : at::ObserverContext {
  std::shared_ptr<ThreadRanges::State> state;
};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction&) {
  std::shared_ptr<ThreadRanges::State> state = current();
  if (!state) return nullptr;
  const uint64_t id = state->open_id.load();
  if (id == 0) return nullptr;
  state->push(id);
  auto pushed = std::make_unique<Pushed>();
  pushed->state = std::move(state);
  return pushed;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* context) {
  if (auto* pushed = dynamic_cast<Pushed*>(context)) pushed->state->pop();
}

}  // namespace

ThreadRanges::ThreadRanges(std::function<void(uint64_t)> push, std::function<void()> pop) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_state) throw std::logic_error("thread ranges: one is already live in this process");
    g_state = std::make_shared<State>();
    g_state->push = std::move(push);
    g_state->pop = std::move(pop);
  }
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                                      .needsInputs(false)
                                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

ThreadRanges::~ThreadRanges() {
  at::removeCallback(handle_);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_state.reset();
}

void ThreadRanges::set_open(uint64_t external_id) {
  if (auto state = current()) state->open_id.store(external_id);
}

}  // namespace memopt::measure

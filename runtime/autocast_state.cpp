// autocast_state.cpp: ATen's per-device autocast switches (thread-local).
#include "runtime/autocast_state.h"

#include <ATen/autocast_mode.h>

namespace memopt::runtime {
namespace {

AutocastState::Device read(at::DeviceType type) {
  return {at::autocast::is_autocast_enabled(type), at::autocast::get_autocast_dtype(type)};
}

void write(at::DeviceType type, const AutocastState::Device& d) {
  at::autocast::set_autocast_enabled(type, d.enabled);
  at::autocast::set_autocast_dtype(type, d.dtype);
}

}  // namespace

AutocastState autocast_state() {
  return {read(at::kCPU), read(at::kCUDA), at::autocast::is_autocast_cache_enabled()};
}

void set_autocast_state(const AutocastState& state) {
  write(at::kCPU, state.cpu);
  write(at::kCUDA, state.cuda);
  at::autocast::set_autocast_cache_enabled(state.cache_enabled);
}

AutocastScope::AutocastScope(const AutocastState& state) : saved_(autocast_state()) {
  set_autocast_state(state);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_state(saved_);
}

}  // namespace memopt::runtime

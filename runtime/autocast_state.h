// autocast_state.h: the autocast mode a stage's forward ran under, captured at its
// first run and put back around each recomputation.
//
// Note [Recompute under the forward's autocast]
// Autocast is a per-thread mode the user enters around the forward
// (`with torch.autocast(...)`) and usually leaves before loss.backward(). A
// recomputation during the backward runs outside it -- on the thread that called
// backward, or on autograd's device thread, which inherits that thread's mode -- and
// would compute in float32 what the first run computed in bfloat16: other values,
// other bytes. So the mode of each stage's first forward is restored around every
// recomputation of it, as torch.utils.checkpoint does.
#pragma once

#include <c10/core/ScalarType.h>

namespace memopt::runtime {

struct AutocastState {
  struct Device {
    bool enabled = false;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
  };
  Device cpu, cuda;
  bool cache_enabled = true;
};

AutocastState autocast_state();
void set_autocast_state(const AutocastState& state);

// Swaps `state` in and puts what was there back on exit. Like `with torch.autocast`,
// it counts as one level of nesting: leaving the outermost level drops the casts of
// the weights that autocast cached meanwhile, so that a recomputation during the
// backward leaves no bfloat16 copies of them behind.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  AutocastState saved_;
};

}  // namespace memopt::runtime

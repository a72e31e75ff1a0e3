// schedule.h: a schedule is data -- the ops of docs/formats.md, "schedule.json", in program order,
// plus the budget it was solved for and what the simulator predicts for it.
#pragma once

#include <compare>
#include <cstddef>
#include <iterator>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memopt::solver {

// Note [One table per enumeration]: the enum, its JSON word and whether it takes a
// stage index are defined once, in kOpKinds; everything else looks them up there.
//
// Note [The semantics of an op kind]
// Each row of kOpKinds also says what kind of op it is, so that no code spells a
// list of kinds out: whether it computes (docs/formats.md, "Operations and memory without offload:
// the sequential simulator") or copies, which way a copy
// goes, what it moves, the copy that undoes it, and whether it is one of the three
// forwards. What an op does to memory and time is the simulators' and the executor's,
// each a switch over OpKind with a case for every kind and no default: with
// -Werror=switch (CMakeLists.txt) a kind added to the enum does not compile until
// every one of them, and the row here, says what it does.
enum class OpKind {
  FwdKeep, FwdCkpt, FwdDrop, Loss, Bwd, Offload, Prefetch, OffloadSaved, PrefetchSaved, OffloadInput, PrefetchInput,
  OffloadCarried, PrefetchCarried, WaitOffloads
};

enum class CopyDirection { None, ToHost, ToDevice };

// What a copy moves of a_k (docs/formats.md, "Copy ops" and "Carried bytes"): the whole plain activation, the
// saved state of ā_k beyond a_k, the bytes of a_k no neighbour shares, or the bytes
// a_k took over from a_{k-1} and does not pass on.
enum class CopyPayload { None, Activation, SavedState, OwnBytes, EndingCarry };

struct OpKindInfo {
  OpKind kind;
  std::string_view word;  // in schedule.json and in printed schedules
  bool has_index;
  bool is_compute;        // a compute op of docs/formats.md, "Operations and memory without offload: the sequential simulator" (runs on the compute stream)
  CopyDirection direction;
  CopyPayload payload;
  OpKind counterpart;     // a copy's other way (offload <-> prefetch); the kind itself otherwise
  bool is_forward;        // fwd_keep, fwd_ckpt, fwd_drop
};

inline constexpr OpKindInfo kOpKinds[] = {
    {OpKind::FwdKeep, "fwd_keep", true, true, CopyDirection::None, CopyPayload::None, OpKind::FwdKeep, true},
    {OpKind::FwdCkpt, "fwd_ckpt", true, true, CopyDirection::None, CopyPayload::None, OpKind::FwdCkpt, true},
    {OpKind::FwdDrop, "fwd_drop", true, true, CopyDirection::None, CopyPayload::None, OpKind::FwdDrop, true},
    {OpKind::Loss, "loss", false, true, CopyDirection::None, CopyPayload::None, OpKind::Loss, false},
    {OpKind::Bwd, "bwd", true, true, CopyDirection::None, CopyPayload::None, OpKind::Bwd, false},
    {OpKind::Offload, "offload", true, false, CopyDirection::ToHost, CopyPayload::Activation, OpKind::Prefetch, false},
    {OpKind::Prefetch, "prefetch", true, false, CopyDirection::ToDevice, CopyPayload::Activation, OpKind::Offload,
     false},
    // memopt's extension (Note [Offloading saved state] in simulate.h): move
    // the part of ā_k beyond a_k, x̄_k - x_k bytes, out and back.
    {OpKind::OffloadSaved, "offload_saved", true, false, CopyDirection::ToHost, CopyPayload::SavedState,
     OpKind::PrefetchSaved, false},
    {OpKind::PrefetchSaved, "prefetch_saved", true, false, CopyDirection::ToDevice, CopyPayload::SavedState,
     OpKind::OffloadSaved, false},
    // memopt's extension (Note [A kept stage's input may leave] in simulate.h): move
    // the bytes of a_k no neighbour shares out once stage k has run under autograd,
    // and back before anything reads them.
    {OpKind::OffloadInput, "offload_input", true, false, CopyDirection::ToHost, CopyPayload::OwnBytes,
     OpKind::PrefetchInput, false},
    {OpKind::PrefetchInput, "prefetch_input", true, false, CopyDirection::ToDevice, CopyPayload::OwnBytes,
     OpKind::OffloadInput, false},
    // memopt's extension (Note [Carried bytes may leave] in simulate.h): move the
    // bytes a_k took over from a_{k-1} and does not pass on, out once every stage
    // holding them has run under autograd, and back before `bwd k`.
    {OpKind::OffloadCarried, "offload_carried", true, false, CopyDirection::ToHost, CopyPayload::EndingCarry,
     OpKind::PrefetchCarried, false},
    {OpKind::PrefetchCarried, "prefetch_carried", true, false, CopyDirection::ToDevice, CopyPayload::EndingCarry,
     OpKind::OffloadCarried, false},
    // memopt's extension (Note [Waiting for the offloads] in simulate.h): the
    // compute stream waits until every offload issued so far has ended.
    {OpKind::WaitOffloads, "wait_offloads", false, false, CopyDirection::None, CopyPayload::None,
     OpKind::WaitOffloads, false},
};

// The row of `kind` in kOpKinds. A switch with a case per kind and no default, so that
// a kind added to the enum without its row does not compile (Note [The semantics of
// an op kind]); schedule.cpp checks at compile time that each row is its kind's.
constexpr size_t op_kind_row(OpKind kind) {
  switch (kind) {
    case OpKind::FwdKeep: return 0;
    case OpKind::FwdCkpt: return 1;
    case OpKind::FwdDrop: return 2;
    case OpKind::Loss: return 3;
    case OpKind::Bwd: return 4;
    case OpKind::Offload: return 5;
    case OpKind::Prefetch: return 6;
    case OpKind::OffloadSaved: return 7;
    case OpKind::PrefetchSaved: return 8;
    case OpKind::OffloadInput: return 9;
    case OpKind::PrefetchInput: return 10;
    case OpKind::OffloadCarried: return 11;
    case OpKind::PrefetchCarried: return 12;
    case OpKind::WaitOffloads: return 13;
  }
  return std::size(kOpKinds);  // not an OpKind: info() refuses it
}

// Raises the logic_error of an OpKind that is not in kOpKinds (a bug).
[[noreturn]] void unknown_op_kind(OpKind kind);
// Inline: the simulators ask it for every op they run.
inline const OpKindInfo& info(OpKind kind) {
  const size_t i = op_kind_row(kind);
  if (i >= std::size(kOpKinds)) unknown_op_kind(kind);
  return kOpKinds[i];
}
std::optional<OpKind> op_kind_from_word(std::string_view word);

struct Op {
  OpKind kind;
  int index = -1;  // stage i for fwd_*/bwd, activation k for offload/prefetch/*_input/*_carried (ā_k for *_saved), -1 for loss
  friend bool operator==(const Op&, const Op&) = default;
  friend auto operator<=>(const Op&, const Op&) = default;  // so plans order, as map keys
};

std::string to_string(const Op& op);  // "fwd_keep 3", "loss"

// The ops of the links, not of compute: every offload_* and prefetch_*.
inline bool is_copy(OpKind kind) { return info(kind).direction != CopyDirection::None; }
// offload, offload_saved, offload_input, offload_carried: the copies that take data
// off the device.
inline bool is_offload(OpKind kind) { return info(kind).direction == CopyDirection::ToHost; }
// The copy that brings back what an offload moved out, and the reverse.
inline OpKind way_back(OpKind copy) { return info(copy).counterpart; }
inline bool is_forward(OpKind kind) { return info(kind).is_forward; }
// The ops of docs/formats.md, "Offload: the timeline simulator" only: the copies and wait_offloads.
inline bool needs_timeline(OpKind kind) { return !info(kind).is_compute; }

struct Prediction {
  int64_t peak_bytes = 0;
  double time_ms = 0;
};

// Where the profile a schedule was solved for was measured: its device's kind
// ("cpu", "cuda", or a modeled GPU's name) and the model's dtype. Empty: not known
// (a schedule solved for a bare chain, or written before these were recorded).
struct ProfiledOn {
  std::string device;
  std::string dtype;
};

struct Schedule {
  std::string solver;
  int64_t budget_bytes = 0;
  int chain_length = 0;
  Prediction predicted;
  std::vector<Op> ops;
  ProfiledOn profiled_on;
};

}  // namespace memopt::solver

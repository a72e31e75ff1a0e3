// schedule.h: a schedule is data -- the ops of docs/formats.md sections 3-5 in program order,
// plus the budget it was solved for and what the simulator predicts for it.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memopt::solver {

// Note [One table per enumeration]: the enum, its JSON word and whether it takes a
// stage index are defined once, in kOpKinds; everything else looks them up there.
enum class OpKind {
  FwdKeep, FwdCkpt, FwdDrop, Loss, Bwd, Offload, Prefetch, OffloadSaved, PrefetchSaved, OffloadInput, PrefetchInput,
  OffloadCarried, PrefetchCarried, WaitOffloads
};

struct OpKindInfo {
  OpKind kind;
  std::string_view word;  // in schedule.json and in printed schedules
  bool has_index;
  bool is_compute;        // a compute op of section 4 (runs on the compute stream)
  bool is_copy;           // a copy on one of the links (section 5)
};

inline constexpr OpKindInfo kOpKinds[] = {
    {OpKind::FwdKeep, "fwd_keep", true, true, false},   {OpKind::FwdCkpt, "fwd_ckpt", true, true, false},
    {OpKind::FwdDrop, "fwd_drop", true, true, false},   {OpKind::Loss, "loss", false, true, false},
    {OpKind::Bwd, "bwd", true, true, false},            {OpKind::Offload, "offload", true, false, true},
    {OpKind::Prefetch, "prefetch", true, false, true},
    // memopt's extension (Note [Offloading saved state] in simulate.h): move
    // the part of ā_k beyond a_k, x̄_k - x_k bytes, out and back.
    {OpKind::OffloadSaved, "offload_saved", true, false, true},
    {OpKind::PrefetchSaved, "prefetch_saved", true, false, true},
    // memopt's extension (Note [A kept stage's input may leave] in simulate.h): move
    // the bytes of a_k no neighbour shares out once stage k has run under autograd,
    // and back before anything reads them.
    {OpKind::OffloadInput, "offload_input", true, false, true},
    {OpKind::PrefetchInput, "prefetch_input", true, false, true},
    // memopt's extension (Note [Carried bytes may leave] in simulate.h): move the
    // bytes a_k took over from a_{k-1} and does not pass on, out once every stage
    // holding them has run under autograd, and back before `bwd k`.
    {OpKind::OffloadCarried, "offload_carried", true, false, true},
    {OpKind::PrefetchCarried, "prefetch_carried", true, false, true},
    // memopt's extension (Note [Waiting for the offloads] in simulate.h): the
    // compute stream waits until every offload issued so far has ended.
    {OpKind::WaitOffloads, "wait_offloads", false, false, false},
};

const OpKindInfo& info(OpKind kind);
std::optional<OpKind> op_kind_from_word(std::string_view word);

struct Op {
  OpKind kind;
  int index = -1;  // stage i for fwd_*/bwd, activation k for offload/prefetch/*_input/*_carried (ā_k for *_saved), -1 for loss
  friend bool operator==(const Op&, const Op&) = default;
  friend auto operator<=>(const Op&, const Op&) = default;  // so plans order, as map keys
};

std::string to_string(const Op& op);  // "fwd_keep 3", "loss"

// offload, prefetch, *_saved, *_input: ops of the links, not of compute.
inline bool is_copy(OpKind kind) { return info(kind).is_copy; }
// The ops of section 5 only: the copies and wait_offloads.
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

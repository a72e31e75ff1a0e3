// schedule.cpp: lookups into the op table of schedule.h (Note [One table per
// enumeration]) and the one-line text form of an op used in printed schedules.
#include "solver/chain/schedule.h"

#include <iterator>
#include <stdexcept>
#include <string>

namespace memopt::solver {

namespace {
// Each row is its kind's (op_kind_row), so info() is an index.
constexpr bool rows_are_their_kinds() {
  for (size_t i = 0; i < std::size(kOpKinds); ++i)
    if (op_kind_row(kOpKinds[i].kind) != i) return false;
  return true;
}
static_assert(rows_are_their_kinds(), "kOpKinds must list each OpKind at its op_kind_row");

// A copy moves something and does not compute; its counterpart goes the other way and
// moves the same bytes. Every other kind moves nothing and is its own counterpart.
constexpr bool rows_are_consistent() {
  for (const OpKindInfo& k : kOpKinds) {
    const bool copy = k.direction != CopyDirection::None;
    const OpKindInfo& back = kOpKinds[op_kind_row(k.counterpart)];
    if (copy != (k.payload != CopyPayload::None) || (copy && k.is_compute) || (k.is_forward && !k.is_compute))
      return false;
    if (copy ? back.counterpart != k.kind || back.direction == k.direction || back.payload != k.payload
             : k.counterpart != k.kind)
      return false;
  }
  return true;
}
static_assert(rows_are_consistent(), "kOpKinds: each offload_* and its prefetch_* name each other");
}  // namespace

void unknown_op_kind(OpKind kind) {
  throw std::logic_error("bug: OpKind " + std::to_string(static_cast<int>(kind)) + " is not in kOpKinds");
}

std::optional<OpKind> op_kind_from_word(std::string_view word) {
  for (const OpKindInfo& k : kOpKinds)
    if (k.word == word) return k.kind;
  return std::nullopt;
}

std::string to_string(const Op& op) {
  const OpKindInfo& k = info(op.kind);
  std::string text(k.word);
  if (k.has_index) {
    text += ' ';
    text += std::to_string(op.index);
  }
  return text;
}

}  // namespace memopt::solver

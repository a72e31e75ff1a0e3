// schedule.cpp: lookups into the op table of schedule.h (Note [One table per
// enumeration]) and the one-line text form of an op used in printed schedules.
#include "solver/schedule.h"

#include <iterator>
#include <stdexcept>
#include <string>

namespace memopt::solver {

namespace {
// info() indexes the table by the enum's value, so the table must list the kinds in
// declaration order; checked here at compile time rather than searched at run time.
constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < std::size(kOpKinds); ++i)
    if (static_cast<size_t>(kOpKinds[i].kind) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "kOpKinds must list OpKind values in declaration order");
}  // namespace

const OpKindInfo& info(OpKind kind) {
  const auto i = static_cast<size_t>(kind);
  if (i >= std::size(kOpKinds)) throw std::logic_error("bug: OpKind " + std::to_string(i) + " is not in kOpKinds");
  return kOpKinds[i];
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

// format_error.h: the error memopt's file readers throw, one line naming the file,
// the place in it and the fix: "<file>: <JSON path>: <what is wrong>; <fix>"
// (docs/formats.md, "Errors" and "Errors").
#pragma once

#include <stdexcept>

namespace memopt::solver {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace memopt::solver

// read_file.h: the whole text of a file, read with POSIX calls so that a missing file,
// a directory or a failed read each get their own message.
#pragma once

#include <string>

#include "solver/io/format_error.h"

namespace memopt::solver {

// Throws FormatError "<path>: <what failed> (<errno text>); <fix>".
std::string read_file_text(const std::string& path, const std::string& fix);

}  // namespace memopt::solver

// command_line.h: the command a user typed, as one line a shell reads back into the
// same arguments -- the provenance a report or a modeled profile records so that it
// can be regenerated. Plain C++.
#pragma once

#include <string>
#include <string_view>

namespace memopt::common {

// `arg` as one POSIX shell word: unchanged when it holds only characters no shell
// treats specially (letters, digits and @%+=:,./_-), otherwise in single quotes, each
// ' inside written '\''. The empty argument is ''.
std::string shell_quote(std::string_view arg);

// `program` followed by argv[1..argc-1], each shell_quote'd. argv[0] is left out on
// purpose (Note [Program name in a recorded command]).
std::string command_line(std::string_view program, int argc, const char* const* argv);

}  // namespace memopt::common

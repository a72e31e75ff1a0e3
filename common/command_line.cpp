// command_line.cpp: shell quoting of a recorded command.
#include "common/command_line.h"

namespace memopt::common {

namespace {

bool needs_no_quotes(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  for (char safe : std::string_view("@%+=:,./_-"))
    if (c == safe) return true;
  return false;
}

}  // namespace

std::string shell_quote(std::string_view arg) {
  bool plain = !arg.empty();
  for (char c : arg) plain = plain && needs_no_quotes(c);
  if (plain) return std::string(arg);
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";  // close the quotes, an escaped quote, reopen
    else
      out += c;
  }
  out += '\'';
  return out;
}

// Note [Program name in a recorded command]
// argv[0] is however the binary was reached -- build/tools/memopt, a symlink, or an
// absolute path into one machine's checkout -- and a recorded command must read the
// same wherever it was run and never carry a machine's path. So the caller names the
// program, and the arguments follow exactly as given (relative paths stay relative).
std::string command_line(std::string_view program, int argc, const char* const* argv) {
  std::string out(program);
  for (int i = 1; i < argc; ++i) {
    out += ' ';
    out += shell_quote(argv[i]);
  }
  return out;
}

}  // namespace memopt::common

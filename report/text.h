// text.h: the one way the reports print a number into their Markdown.
#pragma once

#include <cstdio>
#include <string>

namespace memopt::report {

// `value` printed with a printf format of one double conversion, e.g. "%+.1f%%".
inline std::string format_number(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace memopt::report

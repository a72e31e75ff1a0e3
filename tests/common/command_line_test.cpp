// command_line_test.cpp: a recorded command reads back, through a real shell, into the
// arguments that were given -- spaces, quotes, empty arguments and shell
// metacharacters included -- and plain arguments stay unquoted.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/command_line.h"

namespace memopt::common {
namespace {

TEST(ShellQuote, PlainWordsStayOthersAreSingleQuoted) {
  const struct { const char* arg; const char* quoted; } cases[] = {
      {"--budgets", "--budgets"},  // plain words as they are
      {"20%:100%:5%", "20%:100%:5%"},
      {"results/2026-11-23-tiny/p.json", "results/2026-11-23-tiny/p.json"},
      {"a=b,c+d@e_f", "a=b,c+d@e_f"},
      {"my dir/p.json", "'my dir/p.json'"},  // spaces and metacharacters single-quoted
      {"$HOME", "'$HOME'"},
      {"a;b", "'a;b'"},
      {"~/p.json", "'~/p.json'"},
      {"*.json", "'*.json'"},
      {"it's", "'it'\\''s'"},  // a quote inside: close, escaped quote, reopen
      {"say \"hi\"", "'say \"hi\"'"},
      {"", "''"},  // the empty argument
  };
  for (const auto& c : cases) EXPECT_EQ(shell_quote(c.arg), c.quoted) << c.arg;
}

TEST(CommandLine, NamesTheProgramNotArgvZero) {
  const char* argv[] = {"/some/checkout/build/tools/memopt", "tradeoff", "--profile", "a b.json", "--out", "d"};
  EXPECT_EQ(command_line("memopt", 6, argv), "memopt tradeoff --profile 'a b.json' --out d");
  const char* alone[] = {"./memopt"};
  EXPECT_EQ(command_line("memopt", 1, alone), "memopt");
}

// What /bin/sh makes of `printf '<%s>' <line>`: each argument between < and >.
std::string shell_split(const std::string& line) {
  FILE* pipe = ::popen(("printf '<%s>' " + line).c_str(), "r");
  if (!pipe) return "popen failed";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  ::pclose(pipe);
  return out;
}

TEST(CommandLine, AShellReadsItBackIntoTheSameArguments) {
  const std::vector<std::string> args = {"", "two words", "it's", "\"double\"", "$PATH", "a\\b", "`id`", "tab\there",
                                         "new\nline", "!bang", "50%"};
  std::string expected;
  for (const std::string& a : args) expected += "<" + a + ">";
  std::vector<const char*> argv = {"memopt"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  const std::string line = command_line("memopt", static_cast<int>(argv.size()), argv.data());
  ASSERT_EQ(line.rfind("memopt ", 0), 0u) << line;
  EXPECT_EQ(shell_split(line.substr(7)), expected) << line;
}

}  // namespace
}  // namespace memopt::common

// fuzz_profile.cpp: libFuzzer target for the profile reader. Any bytes must give a
// Profile or a FormatError -- never a crash, a hang, another exception or a chain
// that validate() refuses -- and what is read must write and read back unchanged.
//   build-fuzz/tests/fuzz/fuzz_profile -max_total_time=20 tests/fuzz/corpus/profile
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "solver/io/json_printer.h"
#include "solver/io/profile_json.h"

using namespace memopt::solver;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Profile p;
  try {
    p = parse_profile(text, "fuzz.json");
  } catch (const FormatError&) {
    return 0;  // refused with a message: the expected outcome for most inputs
  }
  if (std::string e = validate(p.chain); !e.empty()) {
    std::fprintf(stderr, "the reader accepted a chain validate() refuses: %s\n", e.c_str());
    std::abort();
  }
  // What memopt writes, memopt reads back as the same chain.
  const Profile again = parse_profile(format_json(profile_to_json(p)), "fuzz-rewritten.json");
  if (format_json(profile_to_json(again)) != format_json(profile_to_json(p))) {
    std::fprintf(stderr, "a profile changed on writing and reading it back\n");
    std::abort();
  }
  return 0;
}

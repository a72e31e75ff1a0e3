// fuzz_schedule.cpp: libFuzzer target for the schedule reader and the simulators. Any
// bytes must give a Schedule or a FormatError; a schedule read is then replayed on a
// chain of its length by both simulators, which must say valid or name a bad op --
// never crash, whatever order the ops come in.
//   build-fuzz/tests/fuzz/fuzz_schedule -max_total_time=20 tests/fuzz/corpus/schedule
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "solver/io/json_printer.h"
#include "solver/io/schedule_json.h"
#include "solver/chain/simulate.h"

using namespace memopt::solver;

namespace {

// A chain of `length` stages with distinct sizes, and a link so offload ops replay.
Chain chain_of(int length) {
  Chain c;
  c.input_bytes = 64;
  for (int i = 0; i < length; ++i)
    c.stages.push_back({"s" + std::to_string(i), 1.0 + i % 3, 2.0, 100 + 10 * (i % 5), 300 + 10 * (i % 7), 50, 70});
  c.loss = {0.5, 10};
  c.link = Link{1e6, 2e6};
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Schedule s;
  try {
    s = parse_schedule(text, "fuzz.json");
  } catch (const FormatError&) {
    return 0;
  }
  if (s.chain_length > 512) return 0;  // memopt refuses such chains (kMaxStages) before simulating
  const Chain chain = chain_of(s.chain_length);
  const SimResult timeline = simulate_timeline(chain, s.ops);
  const SimResult sequential = simulate_sequential(chain, s.ops);
  if (!timeline.valid && (timeline.error.empty() || timeline.error_op < 0)) {
    std::fprintf(stderr, "an invalid schedule without an error or an op\n");
    std::abort();
  }
  // Without copies the two simulators are the same model (docs/formats.md, "Operations and memory
  // without offload: the sequential simulator" and "Offload: the timeline simulator" agree).
  bool copies = false;
  for (const Op& op : s.ops) copies |= is_copy(op.kind);
  if (!copies && (timeline.valid != sequential.valid ||
                  (timeline.valid && timeline.peak_bytes != sequential.peak_bytes))) {
    std::fprintf(stderr, "simulators disagree: timeline %d %lld, sequential %d %lld\n", timeline.valid,
                 static_cast<long long>(timeline.peak_bytes), sequential.valid,
                 static_cast<long long>(sequential.peak_bytes));
    std::abort();
  }
  // A valid schedule writes and reads back as the same ops.
  if (parse_schedule(format_json(schedule_to_json(s)), "fuzz-rewritten.json").ops != s.ops) {
    std::fprintf(stderr, "a schedule changed on writing and reading it back\n");
    std::abort();
  }
  return 0;
}

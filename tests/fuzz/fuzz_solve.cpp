// fuzz_solve.cpp: libFuzzer target for solve + simulate on random chains. For any
// chain, budget, slot count and solver, `solve` returns a schedule that the simulator
// finds valid and within its budget, or says the budget is infeasible -- and then the
// smallest budget it names does work. Never a crash, a hang or a logic_error.
//   build-fuzz/tests/fuzz/fuzz_solve -max_total_time=30 tests/fuzz/corpus/solve
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/chain/simulate.h"
#include "solver/search/solve.h"

using namespace memopt::solver;

namespace {

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "BUG: %s\n", what.c_str());
  std::abort();
}

// Sizes span zero to a few thousand bytes so that slot rounding, zero-sized tensors
// and saved == out all occur; times include zero.
Chain random_chain(FuzzedDataProvider& in) {
  Chain c;
  const int L = in.ConsumeIntegralInRange(1, 10);
  c.input_bytes = in.ConsumeIntegralInRange<int64_t>(0, 4000);
  for (int i = 0; i < L; ++i) {
    Stage s;
    s.name = "s" + std::to_string(i);
    s.fwd_ms = in.ConsumeIntegralInRange(0, 1000) / 100.0;
    s.bwd_ms = in.ConsumeIntegralInRange(0, 2000) / 100.0;
    s.out_bytes = in.ConsumeIntegralInRange<int64_t>(0, 4000);
    s.saved_bytes = s.out_bytes + in.ConsumeIntegralInRange<int64_t>(0, 8000);
    s.fwd_tmp_bytes = in.ConsumeIntegralInRange<int64_t>(0, 3000);
    s.bwd_tmp_bytes = in.ConsumeIntegralInRange<int64_t>(0, 3000);
    if (in.ConsumeBool()) s.fwd_keep_tmp_bytes = in.ConsumeIntegralInRange<int64_t>(0, 3000);
    if (in.ConsumeBool()) s.fwd_nograd_ms = s.fwd_ms * in.ConsumeIntegralInRange(0, 100) / 100.0;
    c.stages.push_back(s);
  }
  c.loss.bwd_ms = in.ConsumeIntegralInRange(0, 100) / 100.0;
  c.loss.bwd_tmp_bytes = in.ConsumeIntegralInRange<int64_t>(0, 2000);
  if (in.ConsumeBool()) {
    const double d2h = in.ConsumeIntegralInRange(1, 1000) * 1e3;  // bytes per s: copies of ~1-1000 ms
    c.link = Link{d2h, in.ConsumeBool() ? d2h : in.ConsumeIntegralInRange(1, 1000) * 1e3};
  }
  // Roles (selective, pointwise) and carried bytes (docs/formats.md, "Carried bytes"), drawn
  // last so that older seeds keep their meaning.
  for (int i = 0; i < L; ++i) {
    Stage& s = c.stages[static_cast<size_t>(i)];
    s.role = kStageRoles[in.ConsumeIntegralInRange<size_t>(0, std::size(kStageRoles) - 1)].value;
    s.carried_bytes = in.ConsumeIntegralInRange<int64_t>(0, std::min(s.out_bytes, c.x(i)));
  }
  return c;
}

void check(const Chain& chain, const SolveOptions& options, const Schedule& s) {
  const SimResult r = simulate_timeline(chain, s.ops);
  const std::string who = std::string(info(options.solver).word) + " at " + std::to_string(options.budget_bytes) +
                          " B, " + std::to_string(options.slots) + " slots";
  if (!r.valid) bug(who + ": returned an invalid schedule: " + r.error);
  if (r.peak_bytes > options.budget_bytes)
    bug(who + ": returned a schedule peaking at " + std::to_string(r.peak_bytes) + " B");
  if (r.peak_bytes != s.predicted.peak_bytes || r.time_ms != s.predicted.time_ms)
    bug(who + ": predicted is not the simulator's number");
  if (s.chain_length != chain.length()) bug(who + ": wrong chain_length");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Chain chain = random_chain(in);
  if (!validate(chain).empty()) bug("random_chain made an invalid chain: " + validate(chain));
  const int64_t store_all_peak = store_all_peak_bytes(chain);
  SolveOptions options;
  // 1% to 150% of the store-all peak, at least one byte.
  options.budget_bytes = std::max<int64_t>(1, store_all_peak * in.ConsumeIntegralInRange(1, 150) / 100);
  options.slots = in.ConsumeIntegralInRange(1, 300);
  options.num_threads = 1;
  options.solver = kSolverKinds[in.ConsumeIntegralInRange<size_t>(0, std::size(kSolverKinds) - 1)].kind;
  // Bisection costs tens of solves: do it on one input in four.
  options.find_min_budget = in.ConsumeIntegralInRange(0, 3) == 0;
  try {
    check(chain, options, solve(chain, options));
  } catch (const InfeasibleBudget& e) {
    if (options.find_min_budget && e.min_budget_bytes > 0) {
      if (e.min_budget_bytes <= options.budget_bytes)
        bug(std::string(info(options.solver).word) + ": infeasible at " + std::to_string(options.budget_bytes) +
            " B but names a smaller minimum " + std::to_string(e.min_budget_bytes));
      SolveOptions at_min = options;
      at_min.budget_bytes = e.min_budget_bytes;
      try {
        check(chain, at_min, solve(chain, at_min));
      } catch (const InfeasibleBudget&) {
        bug(std::string(info(options.solver).word) + ": the minimum budget it names (" +
            std::to_string(e.min_budget_bytes) + " B) does not work");
      }
    }
  } catch (const std::runtime_error& e) {
    // rotor-compat's known over-budget schedules are refused, by design (docs/formats.md, "rotor's
    // published recurrence (`rotor-compat`)").
    if (options.solver != SolverKind::RotorCompat) bug(std::string("unexpected runtime_error: ") + e.what());
  } catch (const std::invalid_argument& e) {
    // offload-all without a link, selective or pointwise without roles: refused with
    // a message, by design.
    if (solver_needs(options.solver, chain).empty())
      bug(std::string("unexpected invalid_argument: ") + e.what());
  }
  return 0;
}

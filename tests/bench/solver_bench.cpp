// solver_bench.cpp: Google Benchmark timings of the recompute DP (solver/dp/rotor.h) on a
// GPT-2-shaped chain (tests/solver/random_chains.h: gpt2_like_chain) at a budget of 50%
// of its store-all peak.
//
//   BM_SolveOptimal/L/slots      solve_recompute: the filled table plus the
//                                reconstruction of the schedule (all cores)
//   BM_SolveOptimalOneThread/L/slots   the same with num_threads = 1
//   BM_SolveOffload/L/500        solve_offload (solver/dp/offload.h) over a 16 GB/s link
//   BM_SolveOffloadPipeline/L/500  solve_offload_pipeline (solver/dp/offload_pipeline.h),
//                                the same link: every (p, q) simulated, bisection on d
//   BM_SolveOptimalWithLink/L/500  solve() with --solver optimal on one thread: both of
//                                the above, the baselines, the simulation of each and the
//                                polish of the fastest (docs/formats.md, "The polish"); at
//                                L = 48 and 96 its plan takes the least time any plan
//                                can, so no plan over the budget is repaired
//   BM_SolveOptimalWithSlowLink/L/500  the same over a 1 GB/s link, where copies stall
//                                and `optimal` also repairs the DP's plans at larger
//                                budgets and kicks its plan (docs/formats.md, "The polish": the repair
//                                and the kicks); both report the plan's predicted_ms
//   BM_ReferenceRecompute/L/500  reference_recompute_value: the plain Θ(slots·L³) loop
//                                kept for the tests, for comparison
//   BM_BlockDominated/L/threads  solve_recompute on block_dominated_chain (alternating
//                                attention and MLP halves, +-10% per stage, a chunked
//                                loss's small head) at 40% of store-all, 500 slots, on
//                                all cores (threads = 0) or one; predicted_ms is the
//                                plan's simulated time
//   BM_BlockDominatedRecomputeOnly/L/threads  solve() --solver recompute-only on the same
//                                chain: the DP with its slack re-solves and the baselines
//   BM_BlockDominatedOptimalSlowLink/L/threads  solve() --solver optimal on the same
//                                chain over a 1 GB/s link, on all cores (threads = 0: the
//                                classes' searches and the kicks side by side) or one
//   BM_BlockDominatedOffloadDp/L  solve_offload alone on the same chain over a 1 GB/s
//                                link, the widest class at the budget, one thread, the
//                                recompute table filled once outside the loop and kept
//                                DP memory (as `optimal` calls it): one of the sixteen
//                                offload DPs of BM_BlockDominatedOptimalSlowLink
//   BM_SolveOperatorStages/layers/threads  solve() with --solver recompute-only on the
//                                modeled GPT-2 (C=1600, H=25, bf16, H100, B=8, T=1024) at
//                                operator granularity with explicit attention, 9 stages
//                                per layer plus embed and head: 434 stages for XL's 48
//                                layers, 506 for 56, 500 slots, 50% of store-all. Carried bytes
// included. Not checked against the
//                                reference (minutes at this size); the tests do that on
//                                small chains.
//
// Every benchmark first checks that the fast DP's value equals the plain reference's
// (skipped with an error otherwise) and reports it as the counter values_identical = 1.
// Run:  build/tests/bench/solver_bench --benchmark_out=solver_bench.json --benchmark_out_format=json
// or tools/run_solver_bench.sh, which also writes results/solver-bench/README.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <utility>
#include <optional>
#include <string>

#include "gpt2/estimate.h"
#include "solver/dp/baselines.h"
#include "solver/search/budget.h"
#include "solver/dp/offload.h"
#include "solver/dp/offload_pipeline.h"
#include "solver/search/solve.h"
#include "solver/dp/rotor.h"
#include "solver/chain/simulate.h"
#include "tests/solver/random_chains.h"

namespace memopt::solver {
namespace {

constexpr double kBudgetFractionOfStoreAll = 0.5;

struct Problem {
  Chain chain;
  int64_t budget_bytes = 0;
};

Problem make_problem(int L) {
  Problem p{testing::gpt2_like_chain(L), 0};
  const int64_t store_all_peak = store_all_peak_bytes(p.chain);
  p.budget_bytes = static_cast<int64_t>(kBudgetFractionOfStoreAll * static_cast<double>(store_all_peak));
  return p;
}

DpOptions dp_options(int slots) {
  DpOptions o;
  o.slots = slots;
  return o;
}

struct Check {
  std::optional<int64_t> fast, reference;
};

// Checks the fast DP against the plain reference on this problem; false (and the
// benchmark skipped with an error) if they differ. Google Benchmark calls a benchmark
// function once per repetition and per trial run, so each (L, slots) is checked once.
bool values_identical(benchmark::State& state, const Problem& p, int slots) {
  static std::map<std::pair<int, int>, Check> checked;
  const auto key = std::make_pair(p.chain.length(), slots);
  if (!checked.count(key)) {
    checked[key] = {fast_recompute_value(p.chain, p.budget_bytes, dp_options(slots)),
                    reference_recompute_value(p.chain, p.budget_bytes, dp_options(slots))};
  }
  const auto& [fast, reference] = checked[key];
  if (fast != reference) {
    state.SkipWithError("fast_recompute_value differs from reference_recompute_value");
    return false;
  }
  if (!fast) {
    state.SkipWithError("the budget is infeasible for this chain");
    return false;
  }
  state.counters["values_identical"] = 1;
  state.counters["value_ms"] = static_cast<double>(*fast) * time_quantum_for(p.chain).unit_ms;
  return true;
}

void set_common_counters(benchmark::State& state, const Problem& p, int slots) {
  state.counters["L"] = p.chain.length();
  state.counters["slots"] = slots;
  state.counters["budget_fraction_of_store_all"] = kBudgetFractionOfStoreAll;
}

void BM_SolveOptimal(benchmark::State& state) {
  const int L = static_cast<int>(state.range(0));
  const int slots = static_cast<int>(state.range(1));
  const Problem p = make_problem(L);
  if (!values_identical(state, p, slots)) return;
  set_common_counters(state, p, slots);
  size_t num_ops = 0;
  for (auto _ : state) {
    std::optional<std::vector<Op>> ops = solve_recompute(p.chain, p.budget_bytes, dp_options(slots));
    benchmark::DoNotOptimize(ops);
    num_ops = ops ? ops->size() : 0;
  }
  state.counters["num_ops"] = static_cast<double>(num_ops);
}

// The same solve on one thread: the algorithm's cost without the wavefront's
// synchronisation, which on a shared, busy machine can dominate.
void BM_SolveOptimalOneThread(benchmark::State& state) {
  const int L = static_cast<int>(state.range(0));
  const int slots = static_cast<int>(state.range(1));
  const Problem p = make_problem(L);
  if (!values_identical(state, p, slots)) return;
  set_common_counters(state, p, slots);
  DpOptions o = dp_options(slots);
  o.num_threads = 1;
  for (auto _ : state) {
    std::optional<std::vector<Op>> ops = solve_recompute(p.chain, p.budget_bytes, o);
    benchmark::DoNotOptimize(ops);
  }
}

void BM_ReferenceRecompute(benchmark::State& state) {
  const int L = static_cast<int>(state.range(0));
  const int slots = static_cast<int>(state.range(1));
  const Problem p = make_problem(L);
  if (!values_identical(state, p, slots)) return;
  set_common_counters(state, p, slots);
  for (auto _ : state) {
    std::optional<int64_t> value = reference_recompute_value(p.chain, p.budget_bytes, dp_options(slots));
    benchmark::DoNotOptimize(value);
  }
}

// Chains like measured sublayer profiles, where blocks dominate memory
// (block_dominated_chain): the DP's cost where its slots are small next to a stage.
constexpr double kBlockDominatedBudget = 0.4;

Problem block_dominated_problem(int L) {
  Problem p{testing::block_dominated_chain(L), 0};
  p.budget_bytes = static_cast<int64_t>(kBlockDominatedBudget * static_cast<double>(store_all_peak_bytes(p.chain)));
  return p;
}

void BM_BlockDominated(benchmark::State& state) {
  const Problem p = block_dominated_problem(static_cast<int>(state.range(0)));
  DpOptions o = dp_options(500);
  o.num_threads = static_cast<int>(state.range(1));
  if (!values_identical(state, p, 500)) return;
  std::optional<std::vector<Op>> ops;
  for (auto _ : state) {
    ops = solve_recompute(p.chain, p.budget_bytes, o);
    benchmark::DoNotOptimize(ops);
  }
  state.counters["L"] = p.chain.length();
  state.counters["slots"] = 500;
  state.counters["budget_fraction_of_store_all"] = kBlockDominatedBudget;
  state.counters["predicted_ms"] = ops ? simulate_timeline(p.chain, *ops).time_ms : 0.0;
}

// solve() with `kind` on the block-dominated chain of L stages, `threads` for the DP.
void solve_block_dominated(benchmark::State& state, SolverKind kind, const std::optional<Link>& link,
                           int threads) {
  Problem p = block_dominated_problem(static_cast<int>(state.range(0)));
  p.chain.link = link;
  SolveOptions o;
  o.budget_bytes = p.budget_bytes;
  o.solver = kind;
  o.slots = 500;
  o.num_threads = threads;
  double predicted_ms = 0;
  for (auto _ : state) {
    Schedule s = solve(p.chain, o);
    predicted_ms = s.predicted.time_ms;
    benchmark::DoNotOptimize(s);
  }
  state.counters["L"] = p.chain.length();
  state.counters["predicted_ms"] = predicted_ms;
}

void BM_BlockDominatedRecomputeOnly(benchmark::State& state) {
  solve_block_dominated(state, SolverKind::RecomputeOnly, std::nullopt, static_cast<int>(state.range(1)));
}
void BM_BlockDominatedOptimalSlowLink(benchmark::State& state) {
  solve_block_dominated(state, SolverKind::Optimal, Link{1e9, 1e9}, static_cast<int>(state.range(1)));
}

void BM_BlockDominatedOffloadDp(benchmark::State& state) {
  Problem p = block_dominated_problem(static_cast<int>(state.range(0)));
  p.chain.link = Link{1e9, 1e9};
  DpOptions o = dp_options(500);
  o.num_threads = 1;
  const RecomputeTable table(p.chain, p.budget_bytes, o);
  OffloadDpMemory memory;
  std::optional<std::vector<Op>> ops;
  for (auto _ : state) {
    ops = solve_offload(p.chain, p.budget_bytes, o, &memory, &table);
    benchmark::DoNotOptimize(ops);
  }
  state.counters["L"] = p.chain.length();
  state.counters["predicted_ms"] = ops ? simulate_timeline(p.chain, *ops).time_ms : 0.0;
}

BENCHMARK(BM_BlockDominatedOffloadDp)->ArgNames({"L"})->Arg(48)->Arg(96)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_BlockDominatedRecomputeOnly)
    ->ArgNames({"L", "threads"})
    ->ArgsProduct({{96, 192}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_BlockDominated)
    ->ArgNames({"L", "threads"})
    ->ArgsProduct({{48, 96, 192}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_BlockDominatedOptimalSlowLink)
    ->ArgNames({"L", "threads"})
    ->ArgsProduct({{48, 96}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

BENCHMARK(BM_SolveOptimal)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96, 192}, {500, 2000}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_SolveOptimalOneThread)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96, 192}, {500, 2000}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// An offload solver on the same chain over a PCIe-like 16 GB/s link.
using OffloadSolver = std::optional<std::vector<Op>> (*)(const Chain&, int64_t, const DpOptions&);
void run_offload_solver(benchmark::State& state, OffloadSolver solve_fn, int num_threads) {
  Problem p = make_problem(static_cast<int>(state.range(0)));
  p.chain.link = Link{16e9, 16e9};
  const int slots = static_cast<int>(state.range(1));
  DpOptions o = dp_options(slots);
  o.num_threads = num_threads;
  for (auto _ : state) {
    auto ops = solve_fn(p.chain, p.budget_bytes, o);
    if (!ops) { state.SkipWithError("infeasible"); break; }
    benchmark::DoNotOptimize(ops);
  }
  set_common_counters(state, p, slots);
}

// The keep/recompute/offload DP (solver/dp/offload.h): the item DP plus the recompute
// table it prices segments with.
void BM_SolveOffload(benchmark::State& state) {
  run_offload_solver(
      state, [](const Chain& chain, int64_t budget, const DpOptions& dp) { return solve_offload(chain, budget, dp); },
      0);
}

BENCHMARK(BM_SolveOffload)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96}, {500}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SolveOffloadPipeline(benchmark::State& state) {
  run_offload_solver(
      state, [](const Chain& c, int64_t budget, const DpOptions& o) { return solve_offload_pipeline(c, budget, o); }, 1);
}

void solve_optimal_with_link(benchmark::State& state, double bytes_per_s) {
  Problem p = make_problem(static_cast<int>(state.range(0)));
  p.chain.link = Link{bytes_per_s, bytes_per_s};
  const int slots = static_cast<int>(state.range(1));
  SolveOptions o;
  o.budget_bytes = p.budget_bytes;
  o.slots = slots;
  o.num_threads = 1;
  double predicted_ms = 0;
  for (auto _ : state) {
    Schedule s = solve(p.chain, o);
    predicted_ms = s.predicted.time_ms;
    benchmark::DoNotOptimize(s);
  }
  set_common_counters(state, p, slots);
  state.counters["predicted_ms"] = predicted_ms;  // the plan's quality, beside its cost
}

void BM_SolveOptimalWithLink(benchmark::State& state) { solve_optimal_with_link(state, 16e9); }
void BM_SolveOptimalWithSlowLink(benchmark::State& state) { solve_optimal_with_link(state, 1e9); }

BENCHMARK(BM_SolveOffloadPipeline)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96}, {500}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_SolveOptimalWithLink)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96}, {500}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_SolveOptimalWithSlowLink)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{48, 96}, {500}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_ReferenceRecompute)
    ->ArgNames({"L", "slots"})
    ->ArgsProduct({{24, 48, 96}, {500}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SolveOperatorStages(benchmark::State& state) {
  gpt2::EstimateOptions e;
  e.config = gpt2::gpt2_preset("xl")->config;
  e.config.n_layer = state.range(0);
  e.config.granularity = gpt2::Granularity::Op;
  e.workload = {8, 1024};
  e.gpu = *gpt2::gpu_spec("h100-80gb");
  e.dtype = gpt2::Dtype::Bf16;
  Chain chain = gpt2::estimate_gpt2(e).profile.chain;
  chain.link.reset();
  SolveOptions o;
  o.solver = SolverKind::RecomputeOnly;
  o.budget_bytes = static_cast<int64_t>(kBudgetFractionOfStoreAll * static_cast<double>(store_all_peak_bytes(chain)));
  o.num_threads = static_cast<int>(state.range(1));
  for (auto _ : state) {
    Schedule s = solve(chain, o);
    benchmark::DoNotOptimize(s);
  }
  state.counters["L"] = chain.length();
  state.counters["slots"] = o.slots;
  state.counters["budget_fraction_of_store_all"] = kBudgetFractionOfStoreAll;
}

BENCHMARK(BM_SolveOperatorStages)
    ->ArgNames({"layers", "threads"})
    ->ArgsProduct({{12, 48, 56}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace memopt::solver

BENCHMARK_MAIN();

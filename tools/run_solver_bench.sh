#!/usr/bin/env bash
# run_solver_bench.sh: runs the solver benchmark (tests/bench/solver_bench.cpp) and writes
# <out_dir>/solver_bench.json (Google Benchmark JSON, 5 repetitions) and <out_dir>/README.md
# (the exact command, the machine, the date and a table of median times).
#   tools/run_solver_bench.sh [out_dir]        default out_dir: results/solver-bench
#   BUILD_DIR=build-x tools/run_solver_bench.sh   build tree to use (default: build; configured
#                                                  solver-only, -DMEMOPT_TORCH=OFF, if it does not exist)
#   REPORT_ONLY=1 tools/run_solver_bench.sh        write README.md again from the existing JSON
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=${1:-results/solver-bench}
build_dir=${BUILD_DIR:-build}

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMOPT_TORCH=OFF >/dev/null
fi
cmake --build "$build_dir" --target solver_bench -j "${MEMOPT_JOBS:-2}" >/dev/null

mkdir -p "$out_dir"
json="$out_dir/solver_bench.json"
cmd=("$build_dir/tests/bench/solver_bench" "--benchmark_out=$json" "--benchmark_out_format=json"
     "--benchmark_repetitions=5")
load=$(cut -d' ' -f1-3 /proc/loadavg)  # before the run: other work skews timings
if [[ -n "${REPORT_ONLY:-}" ]]; then
  load="(not recorded: the report was written again from $json)"
else
  "${cmd[@]}"
fi

cpu_model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)
cpus=$(lscpu | sed -n 's/^CPU(s):[[:space:]]*//p' | head -n1)
cores_per_socket=$(lscpu | sed -n 's/^Core(s) per socket:[[:space:]]*//p' | head -n1)
threads_per_core=$(lscpu | sed -n 's/^Thread(s) per core:[[:space:]]*//p' | head -n1)
date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')

python3 - "$json" "$out_dir/README.md" "${cmd[*]}" "$cpu_model" "$cpus" "$cores_per_socket" \
    "$threads_per_core" "$load" "$date_utc" <<'PY'
import json, sys
json_path, readme, command, model, cpus, cores, tpc, load, date = sys.argv[1:10]
with open(json_path) as f:
    data = json.load(f)
# Speed targets (ms): table and reconstruction included. With a link, `optimal` runs
# the offload DP and the pipelined family (solver/dp/offload_pipeline.h) as well.
targets = {("BM_SolveOptimal", 96, 500): 10, ("BM_SolveOptimal", 192, 500): 100, ("BM_SolveOptimal", 96, 2000): 150,
           ("BM_SolveOptimalWithLink", 48, 500): 1000, ("BM_SolveOptimalWithLink", 96, 500): 5000,
           ("BM_SolveOptimalWithSlowLink", 48, 500): 1000, ("BM_SolveOptimalWithSlowLink", 96, 500): 5000,
           ("BM_BlockDominatedRecomputeOnly (one thread)", 96, 500): 20,
           ("BM_BlockDominatedRecomputeOnly (one thread)", 192, 500): 200,
           ("BM_BlockDominatedRecomputeOnly (all cores)", 96, 500): 20,
           ("BM_BlockDominatedRecomputeOnly (all cores)", 192, 500): 200,
           ("BM_BlockDominatedOptimalSlowLink (all cores)", 96, 500): 1000,
           ("BM_BlockDominatedOptimalSlowLink (one thread)", 96, 500): 1000}
rows = []
# The spread of each benchmark's repetitions: Google Benchmark's stddev aggregate.
stddev_ms = {}
for b in data["benchmarks"]:
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "stddev":
        stddev_ms[b["run_name"]] = b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
for b in data["benchmarks"]:
    if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
        continue
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    name = b["run_name"].split("/")[0]
    for part in b["run_name"].split("/")[1:]:  # the thread count of the rows that vary it
        if part.startswith("threads:"):
            name += " (one thread)" if part == "threads:1" else " (all cores)"
    L, slots = int(b["L"]), int(b.get("slots", 500))  # rows without the counter use the default slots
    target = targets.get((name, L, slots))
    rows.append((name, L, slots, b["real_time"] * scale, stddev_ms.get(b["run_name"]), b.get("values_identical"), target,
                 b.get("predicted_ms")))
ctx = data["context"]
lines = [
    "# Solver benchmark: the recompute and offload DPs (docs/formats.md, 'The recompute DP' and 'The offload DP')",
    "",
    "`BM_SolveOptimal` times `solve_recompute` (the filled table plus the reconstruction of",
    "the schedule, all cores; `BM_SolveOptimalOneThread` on one thread);",
    "`BM_ReferenceRecompute` times the plain reference recurrence",
    "kept for the tests. Chain: `gpt2_like_chain(L)` (tests/solver/random_chains.h: a small",
    "embedding stage, L-2 blocks saving ~10x their output, a final stage saving the logits),",
    "budget 50% of its store-all peak. Before timing, every row checks that the fast DP's",
    "value equals the plain reference's (`values identical` = 1). With a 16 GB/s link, on one",
    "thread: `BM_SolveOffload` times the offload DP, `BM_SolveOffloadPipeline` the pipelined",
    "family, `BM_SolveOptimalWithLink` `solve(optimal)`, which runs both, the recompute DP and",
    "the recompute DP with rounding slack (docs/formats.md, 'Discretisation'), then polishes the",
    "fastest plan (docs/formats.md, 'The polish'; no reference to compare with: `-`); at L = 48 and 96 its plan",
    "takes the least time any plan can, so nothing more runs. `BM_SolveOptimalWithSlowLink` is the same",
    "over a 1 GB/s link, where copies stall and `optimal` also repairs the offload DP's plans",
    "at larger budgets and its best plan with a recomputed stage kept (docs/formats.md, 'The polish', \"Repair\"",
    "and \"Keeping a recomputed stage\"), all of it from the offload DP's plans of up to four classes",
    "(docs/formats.md, 'The polish', \"Classes to start from\").",
    "`BM_SolveOperatorStages` times `solve(recompute-only)`, slack included,",
    "on the modeled GPT-2 XL shape at operator granularity with explicit attention (9 stages",
    "per layer, carried bytes; 12, 48 and 56 layers: L = 110, 434 and 506), no link.",
    "The `BM_BlockDominated*` rows run on `block_dominated_chain(L)` (tests/solver/random_chains.h:",
    "alternating attention and MLP halves with +-10% variation and a small head, as measured",
    "sublayer profiles with a chunked loss look), budget 40% of its store-all peak:",
    "`BM_BlockDominated` the recompute DP alone, `BM_BlockDominatedRecomputeOnly`",
    "`solve(recompute-only)`, `BM_BlockDominatedOptimalSlowLink` `solve(optimal)` over a 1 GB/s link",
    "(all cores: the classes' searches and the finalists' kicks side by side, docs/solver.md),",
    "`BM_BlockDominatedOffloadDp` one of that solve's offload DPs alone (the widest class at the budget).",
    "Each row that solves records its plan's predicted step time, so that speed never hides a worse plan.",
    "",
    "Command (from the repository root, via `tools/run_solver_bench.sh`):",
    "",
    "```",
    command,
    "```",
    "",
    f"Machine: {model}; {cpus} logical CPUs ({cores} cores per socket, {tpc} threads per core);",
    f"load average before the run {load} (the machine is shared: compare rows of one run, not runs);\nGoogle Benchmark library: {ctx.get('library_build_type', '?')} build (its timing loop only; memopt is Release).",
    f"Date: {date}.",
    "",
    "Median wall time of 5 repetitions, with their standard deviation:",
    "",
    "| benchmark | L | slots | median ms | stddev ms | target ms | values identical | plan's predicted step ms |",
    "|---|---:|---:|---:|---:|---:|:---:|---:|",
]
for name, L, slots, ms, sd, same, target, predicted in rows:
    lines.append(f"| {name} | {L} | {slots} | {ms:.3f} | {'-' if sd is None else f'{sd:.3f}'} | "
                 f"{'' if target is None else target} | "
                 f"{'-' if same is None else 'yes' if same == 1 else 'NO'} | "
                 f"{'' if predicted is None else f'{predicted:.1f}'} |")
lines += ["", "Raw data: [solver_bench.json](solver_bench.json).", ""]
with open(readme, "w") as f:
    f.write("\n".join(lines))
PY
echo "wrote $json and $out_dir/README.md"

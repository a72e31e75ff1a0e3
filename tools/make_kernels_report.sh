#!/usr/bin/env bash
# make_kernels_report.sh: regenerates the kernels report -- memopt's CPU kernels against
# ATen's on the same shapes, one thread, in ONE process with repetitions interleaved at
# random (Google Benchmark's --benchmark_enable_random_interleaving), each row the
# median of the repetitions' CPU time per element with the interquartile range -- and
# the tiny GPT-2's profile with each kernel choice (the bytes they save).
#   tools/make_kernels_report.sh     (after scripts/build.sh)
# Writes results/kernels-cpu/. Measure on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
date=${1:-$(date +%F)}
dir=results/kernels-cpu
mkdir -p "$dir"
"$memopt" profile --preset tiny --kernels aten > "$dir/profile_tiny_aten.txt"
"$memopt" profile --preset tiny --kernels memopt > "$dir/profile_tiny_memopt.txt"
load=$(cut -d' ' -f1-3 /proc/loadavg)
build/tests/bench/kernels_compare_bench --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.1 --benchmark_out="$dir/kernels_compare_bench.json" --benchmark_out_format=json >/dev/null
"$python" - "$dir" "$date" "$load" <<'PY'
import sys
sys.path.insert(0, "tools")
from benchmark_json import quartiles, repetitions, time_ns
d, date, load = sys.argv[1:4]
j, reps = repetitions(f"{d}/kernels_compare_bench.json")
def per_element_ns(b):
    # CPU time of one iteration over the elements it processes: the product of the
    # benchmark's arguments (n; rows x cols; n x tensors).
    elements = 1
    for a in b["run_name"].split("/")[1:]:
        elements *= int(a)
    return time_ns(b, "cpu_time") / elements
rows = []
for name, bs in reps.items():
    ns = [per_element_ns(b) for b in bs]
    q1, m, q3 = quartiles(ns)
    rows.append((name, m, q1, q3, len(ns)))
o = ["# memopt's own kernels against ATen's on this CPU (MEASURED)", "",
     "Every row is one benchmark of `build/tests/bench/kernels_compare_bench`: memopt's kernels (kernels/cpu) and "
     "ATen's on the same shapes, one thread, in one process, 9 repetitions of each interleaved at random; the "
     "figure is CPU time per element (the product of the benchmark's arguments), median of the repetitions with the "
     "interquartile range.", "", "## Reproduce", "", "```sh", "tools/make_kernels_report.sh", "```", "",
     f"Machine: {j['context'].get('num_cpus')} CPUs at {j['context'].get('mhz_per_cpu')} MHz; load average before "
     f"the run {load}.", "", "| benchmark | ns per element, median | IQR | repetitions |", "|---|---:|---:|---:|"]
for name, m, q1, q3, n in sorted(rows):
    o.append(f"| `{name}` | {m:.2f} | {q1:.2f} - {q3:.2f} | {n} |")
o += ["", "The profiles of the tiny GPT-2 with each kernel choice are in `profile_tiny_aten.txt` and "
      "`profile_tiny_memopt.txt` (`memopt profile --preset tiny --kernels aten|memopt`): the bytes are exact and "
      "predicted by the analytic twin; their stage times are this machine's."]
open(f"{d}/README.md", "w").write("\n".join(o) + "\n")
PY
# The spread across runs, which one run cannot show: from this report's earlier runs.
cat >> "$dir/README.md" <<'ACROSS'

## Across runs

This report is one run: its IQRs are the spread of 9 repetitions interleaved within it. Separate runs of it on this project's 2-CPU testbeds differ far more: at fa68f67 and at 3169afa, memopt's `BM_BiasGeluForward/8192/3072` took 6.45 and 23.11 ns per element and ATen's `BM_AtenNativeDropout/6291456` 5.48 and 7.31, while ATen's `BM_AtenAddGelu/8192/3072` took 4.93 and 4.94. Compare kernels within one run, never across runs.
ACROSS
echo "report in $dir/README.md"

#!/usr/bin/env bash
# scripts/gpu_check.sh's flow, on a machine without a GPU: its parts run the steps they
# name, in order, each once, with the benchmark's flags as documented, and the whole
# run's deadline skips what it cannot finish. cmake, ctest, nvidia-smi, nvcc, the
# memopt CLI and the benchmark are stand-ins that write the files the next steps read.
#   tests/scripts/gpu_check_flow.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: gpu_check_flow.sh SOURCE_DIR}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/scripts" "$tmp/tree/.deps" "$tmp/bin"
cp "$src/scripts/gpu_check.sh" "$tmp/tree/scripts/"

cat > "$tmp/bin/cmake" <<STUB
#!/usr/bin/env bash
echo "cmake \$*"
if [ "\$1" = --build ]; then mkdir -p "\$2/tools" "\$2/python/memopt"; cp "$tmp/memopt" "\$2/tools/memopt"; fi
[ "\$1" = --version ] && echo "cmake version 0"
exit 0
STUB
printf '#!/usr/bin/env bash\necho "$(basename "$0") $*"\n' > "$tmp/bin/ctest"
cp "$tmp/bin/ctest" "$tmp/bin/nvidia-smi"
cp "$tmp/bin/ctest" "$tmp/bin/nvcc"
cat > "$tmp/memopt" <<'STUB'
#!/usr/bin/env bash
# Writes the files its --out and --trace-out name: a profile of one stage, a trace with
# kernels in that stage's forward and backward ranges.
echo "memopt $*"
while [ $# -gt 1 ]; do
  case "$1" in
    --out|--trace-out)
      case "$2" in
        */profile.json) echo '{"stages": [{"name": "s0"}]}' > "$2" ;;
        */trace.json) echo '{"ranges": [{"label": "memopt/fwd_keep/s0", "num_kernels": 1},
                                      {"label": "memopt/bwd/s0", "num_kernels": 1}],
                           "unattributed": {"num_kernels": 0}}' > "$2" ;;
        *) mkdir -p "$(dirname "$2")"; echo '{}' > "$2" ;;
      esac ;;
  esac
  shift
done
STUB
cat > "$tmp/python" <<'STUB'
#!/usr/bin/env bash
if [ "${1:-}" = tools/bench_hf_python.py ]; then echo "bench $*"; exit 0; fi
exec python3 "$@"
STUB
chmod +x "$tmp/bin/"* "$tmp/memopt" "$tmp/python"

failures=0
# check_run NAME EXPECTED_EXIT EXPECTED_STEPS PARTS...: the summary's step names, in order,
# but for the CUDA tests, which run beside other steps: where they ran, once, is checked apart.
check_run() {
  local name=$1 want_rc=$2 want=$3 rc=0
  shift 3
  rm -rf "$tmp/out"
  PATH="$tmp/bin:$PATH" MEMOPT_GPU_PYTHON="$tmp/python" bash "$tmp/tree/scripts/gpu_check.sh" "$tmp/out" "$@" \
    > "$tmp/$name.log" 2>&1 || rc=$?
  local got
  got=$(awk '$1 != "total" && $1 != "cuda_tests" {print $1}' "$tmp/out/summary.txt" | tr '\n' ' ')
  if [ "$rc" != "$want_rc" ] || [ "$got" != "$want" ]; then
    echo "FAIL $name: exit $rc (expected $want_rc)"; echo "  steps:    $got"; echo "  expected: $want"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
built="facts configure build "
profiled="link profile trace_covers_stages "
check_run overlap_goals 0 "$built$profiled""solve_60 run_trace_60 solve_40 run_trace_40 bench_small_goals " \
  overlap goals
bench=$(tar -xzOf "$tmp/out/gpu_check.tar.gz" gpu_check/bench_small_goals.log)
for flag in "--device cuda" "--memopt-compiled" "--memopt-chunked-loss" "--budgets 100%" "--links measured"; do
  case "$bench" in *"$flag"*) ;; *) echo "FAIL goals: the benchmark lacks $flag: $bench"; failures=$((failures + 1)) ;; esac
done
# The build's target: the Python package alone when every part is a benchmark.
built_target() { tar -xzOf "$tmp/out/gpu_check.tar.gz" gpu_check/build.log | sed -n 's/.*--target \([^ ]*\).*/\1/p'; }
[ "$(built_target)" = memopt_cuda_ci ] || { echo "FAIL overlap_goals: built $(built_target)"; failures=$((failures + 1)); }
check_run goals_alone 0 "$built""bench_small_goals bench_large " goals large
[ "$(built_target)" = memopt_python ] || { echo "FAIL goals_alone: built $(built_target)"; failures=$((failures + 1)); }
case "$(tar -xzOf "$tmp/out/gpu_check.tar.gz" gpu_check/bench_large.log)" in
  *"--layers 36 --embd 1280"*"--memopt-chunked-loss"*) ;;
  *) echo "FAIL large: not GPT-2 large with the chunked head"; failures=$((failures + 1)) ;;
esac
checked="solve_100 run_check_100 solve_60 run_check_60 solve_40 run_check_40 solve_min run_check_min "
check_run cli 0 "$built$profiled$checked""tradeoff_run run_trace_60 run_trace_40 " cli
[ "$(grep -c '^cuda_tests ' "$tmp/out/summary.txt")" = 1 ] || { echo "FAIL cli: the CUDA tests did not run once"; failures=$((failures + 1)); }
# The profile is made once a run, whichever parts want it.
check_run cli_then_overlap 0 "$built$profiled$checked""tradeoff_run run_trace_60 run_trace_40 run_trace_60 run_trace_40 " \
  cli overlap
# Too short a deadline: every step is skipped, and without a build the run stops.
MEMOPT_GPU_DEADLINE_S=20 check_run deadline 1 "facts configure " overlap
grep -q "skipped (past the run's deadline)" "$tmp/out/summary.txt" || { echo "FAIL deadline: no step skipped"; failures=$((failures + 1)); }
rc=0
PATH="$tmp/bin:$PATH" bash "$tmp/tree/scripts/gpu_check.sh" "$tmp/out" sideways > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] && echo "ok   unknown part" || { echo "FAIL unknown part: exit $rc"; failures=$((failures + 1)); }
[ "$failures" = 0 ]

#!/usr/bin/env bash
# gpu_check.sh: what memopt checks on a real GPU, as one command, the build included.
# Each step runs under its own time limit and a failed step does not stop the ones that
# do not need it; everything lands in one folder, packed as RESULT_DIR/gpu_check.tar.gz
# beside RESULT_DIR/summary.txt (docs/cuda.md, "The GPU check").
#   scripts/gpu_check.sh RESULT_DIR [PART ...]
# PARTs, in the order given (default: cli):
#   cli     the CUDA tests (the C++ ones and the package's, tests/python/test_cuda_*.py),
#           the copy engine's link, GPT-2 profiled, solved at four budgets and run with
#           its gradients checked, then timed interleaved, and a step of each offloading
#           plan traced (about 4 minutes with the build)
#   overlap of cli only the link, the profile and the traced steps of the offloading
#           plans: whether their copies ran under compute (about a minute)
#   python  the benchmark against HF checkpointing and torch.compile's activation
#           memory budget on GPT-2 small
#   large   the same benchmark on GPT-2 large (36 layers, C = 1280), memopt's eager stages
#           also with the chunked head, which frees the logits' bytes at HF checkpointing's
#           peak (not with compiled stages: their profile compiles 38 stages, time
#           that goals spends on GPT-2 small)
#   compiled  the GPT-2 small benchmark with memopt's stages also compiled
#           (memopt.optimize(compile_stages=True)): does compiling them close the gap to
#           torch.compile at equal memory?
#   chunked the GPT-2 small benchmark with memopt's head also computing the loss by
#           chunks (chunked_loss=True), whose lower floor leaves room at HF
#           checkpointing's peak
#   goals   one GPT-2 small benchmark with all of memopt's kinds -- eager, compiled,
#           chunked, compiled and chunked -- against the competitors measured once
#           (compiled and chunked in one process, for less GPU time than both parts),
#           each kind also at 100%, beside plain training
# A run of benchmark parts alone builds only the Python package. A second call on a
# machine that stayed warm finds build-gpu/ built and rebuilds only what it lacks.
# Needs a CUDA GPU, nvcc 13, CMake, ninja and a Python with a CUDA torch ($MEMOPT_GPU_PYTHON,
# default python3). Needs no registry: the other build dependencies travel in .deps/,
# made beforehand by scripts/vendor_deps.sh on a machine with Debian's packages.
# MEMOPT_GPU_COMPILE_BUDGETS (default 0.5,0.2) lists the torch.compile variants of the
# benchmark. MEMOPT_GPU_PRESET (default small), MEMOPT_GPU_BATCH (8) and MEMOPT_GPU_SEQ (1024) set the
# GPT-2 that is profiled, solved and run. MEMOPT_GPU_DEADLINE_S (default: none) is the whole
# run's limit in seconds: each step's limit shrinks to what is left, a step with too little
# left is skipped, and the results are packed after every step, so that a run cut short by
# its caller still hands back everything it finished.
set -uo pipefail
result=${1:?usage: scripts/gpu_check.sh RESULT_DIR [cli|overlap|python|large|compiled|chunked|goals ...]}
shift
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(cli)
for part in "${parts[@]}"; do
  case "$part" in cli|overlap|python|large|compiled|chunked|goals) ;; *) echo "gpu_check: unknown part '$part' (cli, overlap, python, large, compiled, chunked, goals)" >&2; exit 2 ;; esac
done
mkdir -p "$result"
result=$(cd "$result" && pwd)
cd "$(dirname "$0")/.."
py=${MEMOPT_GPU_PYTHON:-$(command -v python3)}
preset=${MEMOPT_GPU_PRESET:-small}
batch=${MEMOPT_GPU_BATCH:-8}
seq=${MEMOPT_GPU_SEQ:-1024}
build=build-gpu
work=$(mktemp -d)/gpu_check
mkdir -p "$work"
summary=$result/summary.txt
: > "$summary"
memopt=$build/tools/memopt
began=$(date +%s)
deadline_s=${MEMOPT_GPU_DEADLINE_S:-0}

# step NAME SECONDS COMMAND...: runs COMMAND with its output in NAME.log, under a time
# limit (cut to what the deadline leaves); one summary line per step, then a fresh pack.
step() {
  local name=$1 secs=$2
  shift 2
  local start rc
  start=$(date +%s)
  if [ "$deadline_s" -gt 0 ]; then
    local left=$(( deadline_s - (start - began) - 10 ))
    if [ "$left" -lt 15 ]; then
      printf '%-26s %4d s  %s\n' "$name" 0 "skipped (past the run's deadline)" | tee -a "$summary"
      return 125
    fi
    [ "$secs" -le "$left" ] || secs=$left
  fi
  timeout --kill-after=5 "$secs" "$@" > "$work/$name.log" 2>&1
  rc=$?
  local verdict=ok
  [ "$rc" = 0 ] || verdict="FAILED (exit $rc$([ "$rc" = 124 ] && echo ", past its ${secs} s"))"
  printf '%-26s %4d s  %s\n' "$name" "$(( $(date +%s) - start ))" "$verdict" | tee -a "$summary"
  pack_now
  return "$rc"
}

pack_now() {
  cp "$summary" "$work/"
  tar -C "$(dirname "$work")" -czf "$result/gpu_check.tar.gz.part.$BASHPID" gpu_check &&
    mv "$result/gpu_check.tar.gz.part.$BASHPID" "$result/gpu_check.tar.gz"
}

pack() {
  printf 'total %d s\n' "$(( $(date +%s) - began ))" | tee -a "$summary"
  pack_now
}
trap pack EXIT

# 1. The machine.
step facts 30 bash -c "nvidia-smi; nvcc --version; cmake --version | head -1; nproc; free -g;
  '$py' -c 'import torch; p = torch.cuda.get_device_properties(0); print(torch.__version__, torch.version.cuda, p.name, p.total_memory, p.multi_processor_count)';
  '$py' -c 'import sysconfig, os; h = os.path.join(sysconfig.get_paths()[\"include\"], \"Python.h\"); print(h, os.path.exists(h))'"

# 2. The build: the cuda-ci set (CUDA libraries, the whole CLI, the CUDA tests) against
#    the machine's own torch, for Hopper.
if [ ! -d .deps ]; then
  echo "no .deps/: run scripts/vendor_deps.sh on a machine with Debian's packages first, and carry .deps" | tee -a "$summary"
  exit 1
fi
# Note [A unity build on a GPU server]: every source includes LibTorch's CUDA
# headers, which cost most of its compile time; compiled eight to a unit, the build
# parses them an eighth as often (scripts/check_torch_compat.sh builds it the same way).
# The targets that parse no LibTorch -- the solver, the CUDA kernels -- stay one file to a
# unit: they would gain little, and their files keep private helpers of the same name.
step configure 90 cmake --preset cuda -B "$build" -DMEMOPT_PYTHON="$py" -DMEMOPT_DEPS_DIR=.deps \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DMEMOPT_BENCHMARKS=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 ||
  exit 1
# Note [Only the package for the benchmarks]: the benchmark parts run the Python package
# and nothing else; a run of those parts alone builds that target and what it links, not
# the CLI and the C++ tests, and spends less device time before its first measurement.
target=memopt_python
for part in "${parts[@]}"; do
  case "$part" in
    cli|overlap) target=memopt_cuda_ci ;;
    python|large|compiled|chunked|goals) ;;
  esac
done
if [ "$target" = memopt_python ] && grep -q "has no C headers" "$work/configure.log"; then
  echo "build: the benchmark parts need the Python package, and $py has no C headers (see configure.log)" | tee -a "$summary"
  exit 1
fi
step build 360 cmake --build "$build" --target "$target" -j "$(nproc)" || exit 1

# 3-4. The link and GPT-2's profile, once per run (the cli and overlap parts both start here).
profile_gpt2() {
[ -f "$work/profile.json" ] && return
# 3. The copy engine: pinned H2D and D2H alone, both at once, both beside matrix products.
step link 60 "$memopt" link --device cuda --bytes 256MiB --repeat 10 --out "$work/link.json"

# 4. GPT-2 profiled on the GPU: CUDA events, requested bytes, CUPTI kernels per stage op.
step profile 150 "$memopt" profile --device cuda --preset "$preset" --batch "$batch" --seq "$seq" --repeat 3 \
  --out "$work/profile.json" --trace-out "$work/trace.json"
step trace_covers_stages 20 "$py" - "$work/profile.json" "$work/trace.json" <<'PY'
import json, sys
profile, trace = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stages = [s["name"] for s in profile["stages"]]
kernels = {r["label"]: r["num_kernels"] for r in trace["ranges"]}
missing = [f"memopt/{op}/{s}" for s in stages for op in ("fwd_keep", "bwd") if kernels.get(f"memopt/{op}/{s}", 0) == 0]
print(f"{len(stages)} stages; {len(kernels)} ranges; unattributed kernels: {trace['unattributed']['num_kernels']}")
print("ranges with no kernel:", missing or "none")
sys.exit(1 if missing else 0)
PY
}

# 8. Overlap: one step of each offloading plan traced (CUPTI), its copies against its
#    kernels: how much of the links' busy time ran under compute.
trace_offloads() {
for name in 60 40; do
  [ -f "$work/schedule_$name.json" ] ||
    step "solve_$name" 60 "$memopt" solve --profile "$work/profile.json" --budget "$name%" \
      --out "$work/schedule_$name.json" || continue
  step "run_trace_$name" 90 "$memopt" run --device cuda --profile "$work/profile.json" \
    --schedule "$work/schedule_$name.json" --warmup-steps 2 --steps 3 --trace-out "$work/trace_run_$name.json"
done
}

run_cli() {
profile_gpt2

# 5. Every CUDA test, each running its body on the GPU, beside step 6: both check
#    correctness and peaks (per process), neither times anything that is reported.
step cuda_tests 240 ctest --test-dir "$build" -L cuda --output-on-failure --timeout 120 -j 4 &
tests=$!

# 6. Plans at four budgets, each trained with its gradients checked against plain
#    training (deterministic kernels), measured against predicted.
for budget in 100% 60% 40% min; do
  name=${budget%\%}
  step "solve_$name" 60 "$memopt" solve --profile "$work/profile.json" --budget "$budget" \
    --out "$work/schedule_$name.json" &&
  step "run_check_$name" 120 "$memopt" run --device cuda --profile "$work/profile.json" \
    --schedule "$work/schedule_$name.json" --warmup-steps 1 --steps 3 --check --summary-out "$work/runs_checked.jsonl"
done
wait "$tests"

# 7. The same budgets measured interleaved, timed with CUDA events (no check: the kernels
#    training uses), with the trade-off figure; nothing else runs beside it.
step tradeoff_run 240 "$memopt" tradeoff --profile "$work/profile.json" --budgets 100%,60%,40%,25% \
  --solvers optimal,recompute-only --run --warmup-steps 2 --steps 7 --out "$work/tradeoff"
trace_offloads
}

# The users' benchmark -- plain, HF checkpointing, torch.compile at two memory
# budgets, memopt at each one's peak -- through the package built here.
bench() {  # bench NAME SECONDS LAYERS EMBD HEADS [BENCH_FLAGS...]
  if [ ! -d "$build/python/memopt" ]; then
    echo "bench_$1: the Python package was not built ($py has no C headers: see configure.log)" | tee -a "$summary"
    return
  fi
  local name=$1 secs=$2 layers=$3 embd=$4 heads=$5
  shift 5
  PYTHONPATH="$build/python:tools" step "bench_$name" "$secs" "$py" tools/bench_hf_python.py --device cuda \
    --attention sdpa --layers "$layers" --embd "$embd" --heads "$heads" --batch 8 --seq 1024 --links measured \
    --compile-budgets "${MEMOPT_GPU_COMPILE_BUDGETS:-0.5,0.2}" --budgets "" --warmup 2 --steps 5 \
    --out "$work/bench_$name.json" "$@"
}

for part in "${parts[@]}"; do
  case "$part" in
    cli) run_cli ;;
    overlap) profile_gpt2; trace_offloads ;;
    python) bench small 300 12 768 12 ;;
    large) bench large 540 36 1280 20 --memopt-chunked-loss ;;
    compiled) bench small_compiled 420 12 768 12 --memopt-compiled ;;
    chunked) bench small_chunked 300 12 768 12 --memopt-chunked-loss ;;
    goals) bench small_goals 540 12 768 12 --memopt-compiled --memopt-chunked-loss --budgets 100% ;;
  esac
done

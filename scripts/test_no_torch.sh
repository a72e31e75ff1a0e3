#!/usr/bin/env bash
# test_no_torch.sh: builds memopt without LibTorch (-DMEMOPT_TORCH=OFF) into
# build-notorch/ and runs its test suite: the plain C++ layers (common, solver,
# kernels, gpt2, the trace library, report) and the planning CLI (solve, simulate,
# estimate, plan, tradeoff), which must work on a machine without PyTorch. Needs no
# .venv: MEMOPT_PYTHON points nowhere, so nothing in the configure, the build or the
# tests can lean on Python's torch (the figure scripts are skipped; the CLI tests use
# --no-plot and the system python3 only to read JSON).
#   scripts/test_no_torch.sh            (called by scripts/test.sh after the main suite)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MEMOPT_JOBS:-$(nproc)}
build=build-notorch
start=$(date +%s)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi

mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DMEMOPT_TORCH=OFF -DMEMOPT_BENCHMARKS=OFF "-DMEMOPT_PYTHON=$PWD/$build/no-python" \
  > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
grep -q "memopt backends: CPU (solver only, no LibTorch)" "$build/configure.log" ||
  { echo "[no-torch] configure did not report a build without LibTorch:"; cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"
built=$(date +%s)
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 900)
echo "[no-torch] build $((built - start)) s, tests $(( $(date +%s) - built )) s"

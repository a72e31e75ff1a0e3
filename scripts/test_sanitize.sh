#!/usr/bin/env bash
# test_sanitize.sh: builds the solver, measure, profiler, runtime and optimize test suites with
# AddressSanitizer + UndefinedBehaviorSanitizer (g++, -O1) into build-asan/ and runs
# them; the runtime and profiler suites only ever build the tiny GPT-2, so this stays
# a few minutes of testing. Fails on any sanitizer report or failing test.
#   scripts/test_sanitize.sh            (called by scripts/test.sh after the main suite)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MEMOPT_JOBS:-$(nproc)}
build=build-asan
start=$(date +%s)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Note [Sanitizers and the torch wheel]
# Status: the solver suite passes under these settings (116 tests, ~1 min); the
# profiler and runtime suites had not finished their first instrumented build on the
# shared machine when this was written, so the options below for libtorch are the
# usual ones, not yet confirmed here -- if a report points inside libtorch, extend them.
# LibTorch comes from the PyTorch wheel, which is not instrumented. That works:
# - Our executables link -fsanitize=address, so libasan is loaded first and
#   intercepts malloc/free for libtorch too; nothing needs LD_PRELOAD (which would be
#   needed only to sanitize code dlopen'ed into an uninstrumented python).
# - detect_leaks=0: libtorch keeps process-lifetime singletons (allocators,
#   registries, thread pools) that it never frees, and our counting allocator is
#   deliberately immortal (measure/cpu_allocator.h); LeakSanitizer reports them all.
# - detect_odr_violation=0: the wheel bundles its own copies of a few libraries
#   (protobuf, fmt) whose globals collide with nothing of ours but trip the ODR check.
# - alloc_dealloc_mismatch=0: libtorch frees some new[]'d buffers with delete (and
#   vice versa) inside the wheel, where we cannot fix it.
# - UBSan: -fno-sanitize=vptr, because the vptr check needs RTTI of every polymorphic
#   class it sees and the wheel's are not instrumented; every other check is fatal
#   (-fno-sanitize-recover) so a report fails the test.
flags="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_CXX_FLAGS=$flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
  -DMEMOPT_BENCHMARKS=OFF > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" --target memopt_solver_tests memopt_measure_tests memopt_profiler_tests memopt_runtime_tests memopt_optimize_tests
built=$(date +%s)

export ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:alloc_dealloc_mismatch=0:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
# The exhaustive oracle's comparisons (tests/solver/exhaustive_oracle.h) visit about 9
# million plan prefixes: instrumented they take many minutes and gigabytes. They are
# plain arithmetic over the simulator, whose own tests run here, and they run in the
# main suite.
filter_solver=-OffloadDpOracle.*:ExhaustiveOracle.ItsCutsLoseNoPlan
for t in solver/memopt_solver_tests measure/memopt_measure_tests profiler/memopt_profiler_tests runtime/memopt_runtime_tests optimize/memopt_optimize_tests; do
  t0=$(date +%s)
  filter=*
  [ "$t" = solver/memopt_solver_tests ] && filter=$filter_solver
  if "$build/tests/$t" --gtest_brief=1 "--gtest_filter=$filter" > "$build/$(basename "$t").log" 2>&1; then
    echo "[sanitize] $(basename "$t"): $(grep -E '^\[  PASSED  \]' "$build/$(basename "$t").log") in $(( $(date +%s) - t0 )) s"
  else
    echo "[sanitize] $(basename "$t") FAILED; the last lines of $build/$(basename "$t").log:"
    tail -60 "$build/$(basename "$t").log"
    status=1
  fi
done
echo "[sanitize] build $((built - start)) s, tests $(( $(date +%s) - built )) s"
exit $status

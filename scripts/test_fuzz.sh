#!/usr/bin/env bash
# test_fuzz.sh: builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer
# + UndefinedBehaviorSanitizer) into build-fuzz/ and runs each for a bounded time on a
# copy of its seed corpus (tests/fuzz/corpus/<target>). Fails on any crash, sanitizer
# report, hang (> 30 s on one input; a normal one takes well under 1 s) or broken property; the input that did it is
# left as build-fuzz/artifacts/<target>-crash-*, to replay with
#   build-fuzz/tests/fuzz/<target> build-fuzz/artifacts/<target>-crash-...
#   scripts/test_fuzz.sh                 (MEMOPT_FUZZ_SECONDS=20 per target by default)
# Called by scripts/test.sh after the main suite.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${MEMOPT_FUZZ_SECONDS:-20}
jobs=${MEMOPT_JOBS:-$(nproc)}
build=build-fuzz
start=$(date +%s)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Only the solver and the targets: no LibTorch, no tests, no benchmarks. RelWithDebInfo:
# optimised like the real thing, with line numbers in reports.
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_COMPILER=clang++ -DMEMOPT_FUZZ=ON -DMEMOPT_TORCH=OFF -DMEMOPT_TESTS=OFF -DMEMOPT_BENCHMARKS=OFF \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" --target fuzz_profile fuzz_schedule fuzz_solve
built=$(date +%s)

mkdir -p "$build/artifacts"
status=0
for target in fuzz_profile fuzz_schedule fuzz_solve; do
  seeds=tests/fuzz/corpus/${target#fuzz_}
  work=$build/corpus/${target#fuzz_}   # grows with what the fuzzer finds; the seeds stay as committed
  mkdir -p "$work"
  echo "[fuzz] $target for ${seconds}s (seeds: $seeds)"
  if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$target-" "$work" "$seeds" > "$build/$target.log" 2>&1; then
    echo "[fuzz] $target FAILED; the last lines of $build/$target.log:"
    tail -40 "$build/$target.log"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/$target.log" | tail -2 | sed "s/^/[fuzz] $target: /"
  fi
done
end=$(date +%s)
echo "[fuzz] build $((built - start)) s, fuzzing $((end - built)) s"
exit $status

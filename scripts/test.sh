#!/usr/bin/env bash
# test.sh: README command 2 -- installs what is missing, builds, runs every test; then
# the sanitizer build of the solver, profiler and runtime suites (build-asan/) and each
# fuzz target for a bounded time (build-fuzz/).
#   scripts/test.sh        MEMOPT_SANITIZE=0 skips the sanitizer build,
#                          MEMOPT_FUZZ_SECONDS=0 the fuzzing (default 20 s per target)
# Also configures the `cuda` preset into build-cuda/ and builds only its CUDA targets
# and their tests (memopt_cuda_ci), so a CUDA compile or link error fails; without a
# GPU those tests skip themselves. MEMOPT_CUDA_BUILD=0 leaves the CUDA build out.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hashes paths under the checkout relative to it, for all four builds below.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
jobs=${MEMOPT_JOBS:-$(nproc)}
scripts/setup.sh
scripts/build.sh
if [ "${MEMOPT_CUDA_BUILD:-1}" = 1 ]; then
  scripts/setup_cuda.sh
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda-ci -j "$jobs"
  ctest --preset cuda-ci -j "$jobs" --timeout 900
fi
cd build
ctest --output-on-failure -j "$jobs" --timeout 900
cd ..
if [ "${MEMOPT_SANITIZE:-1}" != 0 ]; then scripts/test_sanitize.sh; fi
if [ "${MEMOPT_FUZZ_SECONDS:-20}" != 0 ]; then scripts/test_fuzz.sh; fi

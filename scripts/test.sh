#!/usr/bin/env bash
# test.sh: README command 2 -- installs what is missing, builds, runs every test; then
# the sanitizer build of the solver, profiler and runtime suites (build-asan/) and each
# fuzz target for a bounded time (build-fuzz/).
#   scripts/test.sh        MEMOPT_SANITIZE=0 skips the sanitizer build,
#                          MEMOPT_FUZZ_SECONDS=0 the fuzzing (default 20 s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "${MEMOPT_JOBS:-$(nproc)}" --timeout 900
cd ..
if [ "${MEMOPT_SANITIZE:-1}" != 0 ]; then scripts/test_sanitize.sh; fi
if [ "${MEMOPT_FUZZ_SECONDS:-20}" != 0 ]; then scripts/test_fuzz.sh; fi

#!/usr/bin/env bash
# test.sh: README command 2 -- installs what is missing, builds, runs every test; then
# the build without LibTorch and its tests (build-notorch/), the sanitizer build of the
# solver, profiler and runtime suites (build-asan/) and each fuzz target for a bounded
# time (build-fuzz/).
#   scripts/test.sh        MEMOPT_NO_TORCH=0 skips the build without LibTorch,
#                          MEMOPT_SANITIZE=0 the sanitizer build,
#                          MEMOPT_FUZZ_SECONDS=0 the fuzzing (default 20 s per target)
# Also configures the `cuda` preset into build-cuda/ and builds its CUDA libraries, the
# whole CLI linked against them and the CUDA tests (memopt_cuda_ci), so a CUDA compile
# or link error fails; without a GPU those tests skip themselves. MEMOPT_CUDA_BUILD: auto (default) skips the CUDA
# build, saying why in one line, on a machine with no CUDA toolkit; require fails there
# instead (.ci/run sets it); 0 leaves the CUDA build out.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hashes paths under the checkout relative to it, for all five builds below.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
jobs=${MEMOPT_JOBS:-$(nproc)}
scripts/setup.sh
scripts/build.sh
scripts/install_python.sh
cuda_build=${MEMOPT_CUDA_BUILD:-auto}
case "$cuda_build" in
  auto|require|0|1) ;;
  *) echo "[test] MEMOPT_CUDA_BUILD=$cuda_build: expected auto, require or 0" >&2; exit 2 ;;
esac
if [ "$cuda_build" = auto ] && ! scripts/setup_cuda.sh --find-toolkit >/dev/null 2>&1; then
  echo "[test] CUDA build skipped: no CUDA toolkit (bin/nvcc in \$CUDA_HOME, /usr/local/cuda-13.0 or /usr/local/cuda)" >&2
  cuda_build=0
fi
if [ "$cuda_build" != 0 ]; then scripts/setup_cuda.sh; fi
if [ "$cuda_build" != 0 ]; then
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda-ci -j "$jobs"
  ctest --preset cuda-ci -j "$jobs" --timeout 900
fi
cd build
ctest --output-on-failure -j "$jobs" --timeout 900
cd ..
if [ "${MEMOPT_NO_TORCH:-1}" != 0 ]; then scripts/test_no_torch.sh; fi
if [ "${MEMOPT_SANITIZE:-1}" != 0 ]; then scripts/test_sanitize.sh; fi
if [ "${MEMOPT_FUZZ_SECONDS:-20}" != 0 ]; then scripts/test_fuzz.sh; fi

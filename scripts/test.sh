#!/usr/bin/env bash
# test.sh: README command 2 -- installs what is missing, builds, runs every test.
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "${MEMOPT_JOBS:-$(nproc)}" --timeout 900

#!/usr/bin/env bash
# build.sh: configures and builds memopt into build/ (after scripts/setup.sh).
#   scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MEMOPT_JOBS:-$(nproc)}
launcher=()
# ccache (scripts/setup.sh installs it) makes a rebuild in a fresh clone cheap; paths
# under the checkout are hashed relative to it, so clones anywhere share the cache.
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$jobs"

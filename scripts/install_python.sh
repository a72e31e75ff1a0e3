#!/usr/bin/env bash
# install_python.sh: installs the Python package memopt into .venv (after
# scripts/setup.sh; scripts/test.sh and scripts/demo.sh call it). pip builds it with
# CMake through scikit-build-core (pyproject.toml) against the venv's own torch,
# without build isolation and without dependencies, so pip never pulls another torch.
# Running it again rebuilds only what changed (build-python/, and ccache shares the
# libraries' objects with scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CMAKE_BUILD_PARALLEL_LEVEL=${MEMOPT_JOBS:-$(nproc)}
if command -v ccache >/dev/null; then
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
echo "[install] the memopt Python package into .venv" >&2
.venv/bin/python -m pip install -q --no-build-isolation --no-deps .

#!/usr/bin/env bash
# check_torch_compat.sh: builds memopt's CUDA targets (the `cuda-ci` set: the CUDA
# libraries, the whole CLI and the CUDA tests) against another CUDA torch from PyPI,
# so that a machine with that torch already installed -- GPU images often ship
# 2.11.0+cu130 -- builds memopt without surprises. Compiles and
# links only; nothing runs.
#   scripts/check_torch_compat.sh [VERSION [CMAKE_ARGS...]]   default 2.11.0; builds in
#   build-torch-VERSION/ (with scripts/gpu_check.sh's -DCMAKE_UNITY_BUILD=ON, say, to
#   check scripts/gpu_check.sh's build as it will run)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-2.11.0}
shift || true
jobs=${MEMOPT_JOBS:-$(nproc)}
MEMOPT_NO_TORCH=1 scripts/setup.sh
venv=${XDG_CACHE_HOME:-$HOME/.cache}/memopt/venv-cuda-torch-$version
MEMOPT_CUDA_TORCH=$version MEMOPT_CUDA_VENV=$venv scripts/setup_cuda.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
cmake --preset cuda -B "build-torch-$version" -DMEMOPT_PYTHON="$venv/bin/python" "${launcher[@]}" "$@" >/dev/null
cmake --build "build-torch-$version" --target memopt_cuda_ci -j "$jobs"
echo "[check_torch_compat] memopt's CUDA targets build against torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"

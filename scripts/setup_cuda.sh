#!/usr/bin/env bash
# setup_cuda.sh: installs what the `cuda` CMake preset needs, idempotently, then returns.
#   .venv-cuda (git-ignored): the CUDA build of PyTorch (torch==2.14.1, CUDA 13; about
#   5.5 GB with its nvidia-* wheels), whose LibTorch the CUDA backends link against.
#   MEMOPT_CUDA_TORCH=VERSION installs that torch instead, into a venv of its own
#   whose path it prints, and leaves .venv-cuda alone (scripts/check_torch_compat.sh).
#   It is a venv of its own so that the CPU build keeps the small CPU wheel in .venv;
#   a link to one venv per machine ($MEMOPT_CUDA_VENV, default ~/.cache/memopt/...).
# Checks, and names the fix when missing: nvcc 13 with CUPTI and NVTX 3 headers
# ($CUDA_HOME, else /usr/local/cuda-13.0, else /usr/local/cuda). No GPU or driver is
# needed: the CUDA backends only compile and link here.
# Called by scripts/test.sh; safe to run again at any time.
#   scripts/setup_cuda.sh --find-toolkit   only prints the toolkit's root, or exits 3
#                                          when there is none
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "[setup_cuda] $*" >&2; }
torch_version=${MEMOPT_CUDA_TORCH:-2.14.1}

cuda_root=""
for root in "${CUDA_HOME:-}" /usr/local/cuda-13.0 /usr/local/cuda; do
  if [ -n "$root" ] && [ -x "$root/bin/nvcc" ]; then cuda_root=$root; break; fi
done
if [ -z "$cuda_root" ]; then
  log "no CUDA toolkit found (looked for bin/nvcc in \$CUDA_HOME, /usr/local/cuda-13.0, /usr/local/cuda)."
  log "Install the CUDA 13 toolkit with CUPTI and NVTX, set CUDA_HOME, or skip the CUDA build with MEMOPT_CUDA_BUILD=0."
  exit 3
fi
if [ "${1:-}" = --find-toolkit ]; then echo "$cuda_root"; exit 0; fi
for header in cupti.h nvtx3/nvToolsExt.h; do
  if [ ! -f "$cuda_root/include/$header" ] && [ ! -f "$cuda_root/extras/CUPTI/include/$header" ]; then
    log "$cuda_root has no $header; install the toolkit's CUPTI / NVTX components"
    exit 1
  fi
done

# The venv lives once per machine, outside the clone, and .venv-cuda links to it: CI
# runs in a fresh clone each time, pip keeps no cache of these local wheels, and
# unpacking 5.5 GB again takes 3 min on an idle machine (16 min under load). A real
# .venv-cuda directory, if one exists, is used as it is.
# Note [Venv behind a link]: `python3 -m venv` refuses a path that is a symbolic link,
# so the venv is created at its real place and the link is made afterwards.
shared=${MEMOPT_CUDA_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/memopt/venv-cuda-torch-$torch_version}
mkdir -p "$(dirname "$shared")"
exec 9>"$(dirname "$shared")/.venv-cuda.lock"
flock 9  # two clones setting up at once: one installs, the other waits and reuses
venv=.venv-cuda
if [ -L .venv-cuda ] || [ ! -e .venv-cuda ] || [ -n "${MEMOPT_CUDA_TORCH:-}" ]; then venv=$shared; fi
if [ ! -x "$venv/bin/python" ]; then
  log "creating the CUDA venv at $venv"
  python3 -m venv "$venv"
fi
if [ -n "${MEMOPT_CUDA_TORCH:-}" ]; then
  py=$venv/bin/python  # another version, for a compatibility check: .venv-cuda stays as it is
else
  [ "$venv" = .venv-cuda ] || ln -sfn "$venv" .venv-cuda
  py=.venv-cuda/bin/python
fi
# A CUDA build of the right version, with the C++ headers LibTorch's config needs.
torch_ok() {
  "$py" - "$torch_version" <<'PY' 2>/dev/null
import os, sys, torch
inc = os.path.join(os.path.dirname(torch.__file__), "include")
ok = (torch.__version__.split("+")[0] == sys.argv[1] and torch.version.cuda is not None
      and all(os.path.isdir(os.path.join(inc, d)) for d in ("torch/csrc", "c10/cuda", "ATen/cuda")))
raise SystemExit(0 if ok else 1)
PY
}
if ! torch_ok; then
  log "installing torch==$torch_version (CUDA build, ~5.5 GB) into $venv"
  start=$(date +%s)
  "$py" -m pip install -q "torch==$torch_version"
  log "installed in $(( $(date +%s) - start )) s"
  torch_ok || { log "torch $torch_version in $venv is not a CUDA build with C++ headers"; exit 1; }
fi
# The GPU pytest files (tests/python/test_cuda_*.py) run with the CUDA tests and skip
# without a GPU; they need pytest and transformers beside that torch.
if ! "$py" -c 'import pytest, transformers, numpy' 2>/dev/null; then
  log "installing pytest, transformers and numpy into $venv"
  "$py" -m pip install -q pytest transformers numpy
fi

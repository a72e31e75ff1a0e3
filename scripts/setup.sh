#!/usr/bin/env bash
# setup.sh: installs everything memopt needs, idempotently, then returns.
#   Debian packages: compilers (g++; clang for libFuzzer), CMake, GoogleTest, Google
#   Benchmark, nlohmann/json, CLI11, Gloo headers (c10d's ProcessGroupGloo.hpp includes
#   them; the wheel lacks them).
#   .venv/ (git-ignored): the PyTorch wheel that provides LibTorch, plus the Python
#   packages the tests and report scripts use (transformers, safetensors, matplotlib,
#   pytest, highspy for the copy-placement MILP, accelerate for transformers'
#   Trainer) and scikit-build-core, which
#   scripts/install_python.sh builds memopt's own Python package with.
# Called by scripts/demo.sh and scripts/test.sh; safe to run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "[setup] $*" >&2; }

# ccache: the four builds of scripts/test.sh (CPU, CUDA, sanitizers, fuzzers) share objects.
# clang + libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes (scripts/test_fuzz.sh).
apt_packages=(g++ cmake ninja-build python3-venv libgtest-dev libbenchmark-dev
              nlohmann-json3-dev libcli11-dev libfmt-dev clang libclang-rt-14-dev libgloo-dev ccache)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${MEMOPT_NO_TORCH:-0}" = 1 ]; then
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
py=.venv/bin/python

# LibTorch comes from the PyTorch wheel. The CPU build of 2.13.0 is small; some CPU
# wheels ship only ATen/ headers, so check for torch/csrc and c10 and fall back to
# the full 2.14.1 build, which has them.
torch_headers_ok() {
  "$py" - <<'PY' 2>/dev/null
import os, torch
inc = os.path.join(os.path.dirname(torch.__file__), "include")
ok = all(os.path.isdir(os.path.join(inc, d)) for d in ("torch/csrc", "c10", "ATen"))
raise SystemExit(0 if ok else 1)
PY
}
if ! torch_headers_ok; then
  log "installing torch==2.13.0 (CPU build) into .venv"
  "$py" -m pip install -q torch==2.13.0
  if ! torch_headers_ok; then
    log "torch 2.13.0 lacks torch/csrc or c10 headers; installing the full torch==2.14.1"
    "$py" -m pip install -q torch==2.14.1
  fi
fi

py_packages=(numpy transformers safetensors matplotlib pytest scikit-build-core highspy)
if ! "$py" -c 'import numpy, transformers, safetensors, matplotlib, pytest, scikit_build_core, highspy' 2>/dev/null; then
  log "installing ${py_packages[*]} into .venv"
  "$py" -m pip install -q "${py_packages[@]}"
fi
# accelerate, which transformers' Trainer needs, requires torch: installed without its
# dependencies (psutil apart; the rest came with transformers) so that pip never
# resolves another torch.
if ! "$py" -c 'import accelerate, psutil' 2>/dev/null; then
  log "installing accelerate into .venv"
  "$py" -m pip install -q psutil
  "$py" -m pip install -q --no-deps accelerate
fi

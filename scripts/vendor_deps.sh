#!/usr/bin/env bash
# vendor_deps.sh: gathers memopt's build dependencies other than LibTorch and CUDA --
# nlohmann/json and CLI11 (headers and CMake configs) and GoogleTest's sources -- into
# .deps/ (git-ignored), with the NVTX 3 headers when this machine has a CUDA toolkit, laid out as an install prefix, for a machine that has a
# LibTorch, nvcc and CMake but no Debian dev packages and no registry to reach (the
# GPU server of docs/cuda.md, "Building"). CMake reads it with -DMEMOPT_DEPS_DIR=.deps.
# Copies what scripts/setup.sh installs here; about 5 MiB. Safe to run again.
#   scripts/vendor_deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MEMOPT_NO_TORCH=1 scripts/setup.sh  # the Debian packages copied below

sources=(/usr/include/nlohmann /usr/include/CLI /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11
         /usr/src/googletest)
for s in "${sources[@]}"; do
  [ -e "$s" ] || { echo "[vendor_deps] $s is missing; scripts/setup.sh should have installed it" >&2; exit 1; }
done
tmp=.deps.tmp
rm -rf "$tmp"
mkdir -p "$tmp/include" "$tmp/share/cmake" "$tmp/src"
cp -r /usr/include/nlohmann /usr/include/CLI "$tmp/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$tmp/share/cmake/"
cp -r /usr/src/googletest "$tmp/src/"
# NVTX 3 is header-only; a GPU image's partial toolkit may lack it (Note [Headers beside
# a partial toolkit] in cmake/MemoptCuda.cmake). Copied when this machine's toolkit has it.
nvtx=${CUDA_HOME:-/usr/local/cuda}/include/nvtx3
if [ -d "$nvtx" ]; then cp -r "$nvtx" "$tmp/include/"; fi
rm -rf .deps
mv "$tmp" .deps
echo "[vendor_deps] .deps: $(du -sh .deps | cut -f1) (nlohmann/json, CLI11, GoogleTest sources)" >&2

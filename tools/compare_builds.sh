#!/usr/bin/env bash
# compare_builds.sh: two builds of memopt's solver, side by side, on demand -- so that a
# comparison never needs a committed "before" folder.
#   tools/compare_builds.sh OLD NEW [--speed] [-- PLAN_IDENTITY_FLAGS...]
# OLD and NEW are git revisions (a commit, a branch, HEAD~3; WORKTREE for the working
# tree as it is) or paths to memopt binaries. Each revision is built without LibTorch
# (the solver, the simulators and the planning CLI only) into a cache folder,
# $MEMOPT_BUILDS (default ~/.cache/memopt-builds), once per commit. Then:
#   - tools/plan_identity.py: every committed profile, with and without its link, and
#     the block-dominated chains, at 30%, 50% and 80%, for optimal and recompute-only:
#     which plans differ, and for those, the predicted step time old -> new, with the
#     count of points faster and slower;
#   - with --speed, tools/solver_speed.py: wall time and peak memory of `memopt solve`
#     on the real-shaped chains, interleaved, into $MEMOPT_BUILDS/speed-OLD-NEW/.
# Exits 1 when plans differ (plan_identity's exit status), 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
old=$1 new=$2
shift 2
speed=0
if [ "${1:-}" = --speed ]; then speed=1; shift; fi
if [ "${1:-}" = -- ]; then shift; fi
builds=${MEMOPT_BUILDS:-$HOME/.cache/memopt-builds}
mkdir -p "$builds"

binary_of() {  # a revision or a binary -> the path of a memopt binary (built if need be)
  local what=$1
  if [ -x "$what" ] && [ -f "$what" ]; then echo "$what"; return; fi
  local src dir
  if [ "$what" = WORKTREE ]; then
    src=$PWD
    dir=$builds/worktree
  else
    local commit
    commit=$(git rev-parse --verify --quiet "$what^{commit}") || {
      echo "compare_builds.sh: $what is neither a git revision of this repository nor a memopt binary" >&2
      exit 2
    }
    dir=$builds/$commit
    src=$dir/src
    if [ ! -d "$src" ]; then
      git worktree add --detach "$src" "$commit" >/dev/null 2>&1 ||
        { echo "compare_builds.sh: could not check out $what into $src" >&2; exit 2; }
    fi
  fi
  if [ ! -f "$dir/build/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMOPT_TORCH=OFF \
      -DMEMOPT_TESTS=OFF >"$dir.configure.log" 2>&1 ||
      { echo "compare_builds.sh: configuring $what failed; see $dir.configure.log" >&2; exit 2; }
  fi
  echo "compare_builds.sh: building $what in $dir/build" >&2
  cmake --build "$dir/build" --target memopt -j "${MEMOPT_JOBS:-2}" >"$dir.build.log" 2>&1 ||
    { echo "compare_builds.sh: building $what failed; see $dir.build.log" >&2; exit 2; }
  echo "$dir/build/tools/memopt"
}

old_bin=$(binary_of "$old")
new_bin=$(binary_of "$new")
status=0
python3 tools/plan_identity.py --old "$old_bin" --new "$new_bin" "$@" || status=$?
if [ "$speed" = 1 ]; then
  out=$builds/speed-$(basename "$old")-$(basename "$new")
  python3 tools/solver_speed.py --old "$old_bin" --new "$new_bin" --old-label "$old" --new-label "$new" --out "$out"
  echo "compare_builds.sh: timings in $out/README.md" >&2
fi
exit $status

"""plan_identity.py: do two builds of memopt return the same plans, op for op?

Runs `memopt solve` from an old and a new binary on the same problems and compares the
schedules' ops: every committed profile under results/ with at most --max-stages
stages, with its link and without one (`--bandwidth none`), and the block-dominated
chains of tools/solver_compare.py, each at the budgets of --budgets, for each solver
of --solvers. A change meant to leave behaviour alone (a restructuring, a faster DP
that computes the same values) must print no difference. Exits 1 on any difference,
naming the profile, budget, solver and the first op where the plans part.

`tools/compare_builds.sh OLD NEW` builds two revisions without LibTorch and runs this
script on them; with two binaries at hand:

  python3 tools/plan_identity.py --old OLD/tools/memopt --new build/tools/memopt
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def block_dominated(length):
    # The solver comparison's chain, without importing memopt (it needs only the JSON).
    import importlib.util
    spec = importlib.util.spec_from_file_location("solver_compare_chains", os.path.join(HERE, "solver_compare.py"))
    source = open(spec.origin).read().replace("import memopt  # noqa: E402", "")
    module = type(sys)("solver_compare_chains")
    module.__file__ = spec.origin
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module.block_dominated_profile(length)


def problems(max_stages, lengths):
    for path in sorted(glob.glob(os.path.join(ROOT, "results", "**", "*.json"), recursive=True)):
        try:
            with open(path) as f:
                profile = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(profile, dict) or profile.get("format") != "memopt.profile":
            continue
        if len(profile["stages"]) > max_stages:
            continue
        name = os.path.relpath(path, ROOT)
        yield name, path, []
        if profile.get("link"):
            yield name + " (no link)", path, ["--bandwidth", "none"]
    for length in lengths:
        profile = block_dominated(length)
        handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(profile, handle)
        handle.close()
        yield f"block-dominated L={length}", handle.name, []
        yield f"block-dominated L={length}, 1 GB/s", handle.name, ["--bandwidth", "1GB/s"]


def solve(binary, profile, budget, solver, extra, folder, tag):
    out = os.path.join(folder, f"{tag}.json")
    done = subprocess.run([binary, "solve", "--profile", profile, "--budget", budget, "--solver", solver,
                           "--threads", "1", *extra, "--out", out], capture_output=True, text=True)
    if done.returncode != 0:
        return None, None, done.stderr.strip().splitlines()[-1:] or ["failed"]
    with open(out) as f:
        schedule = json.load(f)
    return schedule["ops"], schedule["predicted"]["time_ms"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old build's memopt binary")
    ap.add_argument("--new", required=True, help="the new build's memopt binary")
    ap.add_argument("--budgets", default="30%,50%,80%")
    ap.add_argument("--solvers", default="optimal,recompute-only")
    ap.add_argument("--max-stages", type=int, default=74, help="skip committed profiles with more stages")
    ap.add_argument("--lengths", default="24,48", help="block-dominated chain lengths")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",") if x]
    compared = differ = faster = slower = 0
    seconds = {"old": 0.0, "new": 0.0}
    with tempfile.TemporaryDirectory() as folder:
        for name, path, extra in problems(args.max_stages, lengths):
            for budget in args.budgets.split(","):
                for solver in args.solvers.split(","):
                    plans = {}
                    for tag, binary in (("old", args.old), ("new", args.new)):
                        start = time.perf_counter()
                        plans[tag] = solve(binary, path, budget, solver, extra, folder, tag)
                        seconds[tag] += time.perf_counter() - start
                    (old_ops, old_ms, old_err), (new_ops, new_ms, new_err) = plans["old"], plans["new"]
                    compared += 1
                    if old_ops == new_ops and old_err == new_err:
                        continue
                    differ += 1
                    if old_ops is None or new_ops is None:
                        print(f"DIFFERS {name} at {budget}, {solver}: old {old_err or 'a plan'}, new {new_err or 'a plan'}")
                        continue
                    first = next((i for i, (a, b) in enumerate(zip(old_ops, new_ops)) if a != b),
                                 min(len(old_ops), len(new_ops)))
                    faster += new_ms < old_ms
                    slower += new_ms > old_ms
                    print(f"DIFFERS {name} at {budget}, {solver}: {len(old_ops)} against {len(new_ops)} ops, "
                          f"first difference at op {first}; predicted {old_ms:.3f} -> {new_ms:.3f} ms")
            print(f"  {name}: done", file=sys.stderr)
    print(f"{compared} problems, {differ} with different plans ({faster} predicted faster, {slower} slower); "
          f"solver time old {seconds['old']:.1f} s, "
          f"new {seconds['new']:.1f} s (one after the other: not a benchmark)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

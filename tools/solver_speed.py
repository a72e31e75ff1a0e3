"""solver_speed.py: how long `memopt solve` takes, and how much memory, on chains like the
ones users profile -- two builds side by side, in interleaved rounds.

A user waits for `memopt solve` as a whole: reading the profile, the chosen solver,
and the table of every solver at the budget. This times that, per problem, for an old
and a new binary in rounds (old new old new ...), after one warm-up round, and reads
each run's peak resident memory (`/usr/bin/time`), its plan's predicted step time and
its ops from schedule.json: a faster build must not hide a slower plan, and where the
plans differ op for op the report says so.

The problems:
  - block-dominated chains (tools/solver_compare.py: alternating attention and MLP
    halves, +-10% per stage, a small head), 40% of store-all: recompute-only at L = 96
    and 192, on one thread and on all cores; optimal over a 1 GB/s link at L = 96;
  - GPT-2 profiles measured on the CPU testbed (committed under results/): sublayer
    stages (18) and operator stages (74), optimal with their measured link, 40%;
  - the modeled GPT-2 XL profile at operator granularity (434 stages), optimal at 40%,
    with its link and without one.

  python3 tools/solver_speed.py --old OLD/tools/memopt --new build/tools/memopt \\
      --out results/solver-speed [--rounds 3] [--only NAME,...]

Writes solver_speed.json (every run) and table.md (medians and ranges, which the
folder's README.md quotes). Run it on an otherwise idle machine: it checks the load
average first and records it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from plan_identity import block_dominated  # noqa: E402  (the solver comparison's chain, JSON only)

MEASURED_SUBLAYER = "results/offload-emulated-cpu/gpt2_8l.profile.json"
MEASURED_OP = "results/op-granularity-cpu/gpt2_8l_op.profile.json"
MODELED_XL_OP = "results/op-granularity/xl-h100-80gb-explicit-op.profile.json"


def problems(folder):
    """(name, profile path, budget, extra flags, target seconds or None)."""
    chains = {}
    for length in (96, 192):
        path = os.path.join(folder, f"block-dominated-{length}.profile.json")
        with open(path, "w") as f:
            json.dump(block_dominated(length), f)
        chains[length] = path
    return [
        ("block-dominated L=96, recompute-only, 1 thread", chains[96], "40%",
         ["--solver", "recompute-only", "--threads", "1"], None),
        ("block-dominated L=96, recompute-only, all cores", chains[96], "40%",
         ["--solver", "recompute-only", "--threads", "0"], None),
        ("block-dominated L=192, recompute-only, 1 thread", chains[192], "40%",
         ["--solver", "recompute-only", "--threads", "1"], None),
        ("block-dominated L=192, recompute-only, all cores", chains[192], "40%",
         ["--solver", "recompute-only", "--threads", "0"], None),
        ("block-dominated L=96, optimal, 1 GB/s", chains[96], "40%", ["--bandwidth", "1GB/s"], 1.0),
        ("measured GPT-2 8 layers, sublayer stages (18), optimal", os.path.join(ROOT, MEASURED_SUBLAYER), "40%", [],
         None),
        ("measured GPT-2 8 layers, operator stages (74), optimal", os.path.join(ROOT, MEASURED_OP), "40%", [], None),
        ("modeled GPT-2 XL, operator stages (434), optimal, its link", os.path.join(ROOT, MODELED_XL_OP), "40%", [],
         10.0),
        ("modeled GPT-2 XL, operator stages (434), optimal, no link", os.path.join(ROOT, MODELED_XL_OP), "40%",
         ["--bandwidth", "none"], None),
    ]


def run(binary, profile, budget, extra, out):
    """Wall seconds, peak resident MiB, predicted ms and ops of one `memopt solve`."""
    cmd = ["/usr/bin/time", "-f", "%e %M", binary, "solve", "--profile", profile, "--budget", budget, *extra,
           "--out", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    seconds, kib = done.stderr.strip().splitlines()[-1].split()
    with open(out) as f:
        schedule = json.load(f)
    return float(seconds), int(kib) / 1024.0, schedule["predicted"]["time_ms"], schedule["ops"]


def spread(values):
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the old build's memopt binary")
    ap.add_argument("--new", required=True, help="the new build's memopt binary")
    ap.add_argument("--out", required=True, help="folder for solver_speed.json and README.md")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds after the warm-up (default 3)")
    ap.add_argument("--only", default="", help="comma-separated substrings: run only problems whose name has one")
    ap.add_argument("--old-label", default="old")
    ap.add_argument("--new-label", default="new")
    args = ap.parse_args()
    for binary in (args.old, args.new):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"--old/--new: {binary} is not an executable memopt binary")
    load = open("/proc/loadavg").read().split()[:3]
    if float(load[0]) > 1.0:
        print(f"warning: load average {' '.join(load)}: other work will skew the timings", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        wanted = [w for w in args.only.split(",") if w]
        for name, profile, budget, extra, target in problems(folder):
            if wanted and not any(w in name for w in wanted):
                continue
            runs = {"old": [], "new": []}
            ops = {}
            for round_index in range(args.rounds + 1):  # round 0 warms up
                for tag, binary in (("old", args.old), ("new", args.new)):
                    seconds, mib, predicted_ms, plan = run(binary, profile, budget, extra,
                                                           os.path.join(folder, f"{tag}.json"))
                    ops[tag] = plan
                    if round_index > 0:
                        runs[tag].append({"seconds": seconds, "peak_mib": mib, "predicted_ms": predicted_ms})
            row = {"problem": name, "budget": budget, "flags": extra, "target_s": target, "runs": runs,
                   "same_plan": ops["old"] == ops["new"]}
            rows.append(row)
            old_s = [r["seconds"] for r in runs["old"]]
            new_s = [r["seconds"] for r in runs["new"]]
            print(f"{name}: {args.old_label} {spread(old_s)} s, {args.new_label} {spread(new_s)} s, "
                  f"same plan: {row['same_plan']}", file=sys.stderr, flush=True)
    record = {"old": args.old_label, "new": args.new_label, "rounds": args.rounds, "load_before": load,
              "cpus": os.cpu_count(), "rows": rows}
    with open(os.path.join(args.out, "solver_speed.json"), "w") as f:
        json.dump(record, f, indent=1)
    lines = [f"| problem | {args.old_label} s | {args.new_label} s | speed-up | target s | "
             f"{args.old_label} MiB | {args.new_label} MiB | predicted ms ({args.old_label} / {args.new_label}) | same plan |",
             "|---|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for row in rows:
        old, new = row["runs"]["old"], row["runs"]["new"]
        old_s = [r["seconds"] for r in old]
        new_s = [r["seconds"] for r in new]
        speedup = statistics.median(old_s) / max(statistics.median(new_s), 1e-9)
        lines.append(
            f"| {row['problem']} | {spread(old_s)} | {spread(new_s)} | {speedup:.1f}x | {row['target_s'] or ''} | "
            f"{max(r['peak_mib'] for r in old):.0f} | {max(r['peak_mib'] for r in new):.0f} | "
            f"{old[0]['predicted_ms']:.3f} / {new[0]['predicted_ms']:.3f} | {'yes' if row['same_plan'] else 'NO'} |")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

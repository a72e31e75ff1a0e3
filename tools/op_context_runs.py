"""op_context_runs.py: where a step's time goes, measured against predicted, op context
by op context (docs/measurement.md, "Where the ops ran"), run after run. Each run is a
fresh `memopt run --op-times` per schedule on one profile; every run re-times the
stages in its own process, so measured over predicted compares ops with ops timed in
the same process. Prints, per schedule and context, measured over predicted across the
runs (median, min, max); writes every run's rows as JSON.

  .venv/bin/python tools/op_context_runs.py --profile P.json --runs 5 --steps 6 \\
      --solvers store-all,recompute-blocks,recompute-all --out out/op-contexts.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True, help="a measured profile.json")
    parser.add_argument("--solvers", default="store-all,recompute-blocks,recompute-all",
                        help="comma-separated solvers, each solved at --budget, or at its own as SOLVER@BUDGET "
                             "(recompute-only@50%%)")
    parser.add_argument("--budget", default="100%", help="the budget every solver is solved at (default 100%%)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6, help="measured steps per run")
    parser.add_argument("--memopt", default="build/tools/memopt")
    parser.add_argument("--out", required=True, help="JSON with every run's rows")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.profile):
        print(f"op_context_runs: {args.profile}: no such profile (make one with `memopt profile`)", file=sys.stderr)
        return 2
    solvers = [s for s in args.solvers.split(",") if s]
    runs = []  # runs[r][solver] = {context: measured/predicted}
    with tempfile.TemporaryDirectory() as folder:
        schedules = {}
        for s in solvers:
            solver, _, budget = s.partition("@")
            schedules[s] = os.path.join(folder, f"{len(schedules)}.json")
            subprocess.run([args.memopt, "solve", "--profile", args.profile, "--solver", solver, "--budget",
                            budget or args.budget, "--out", schedules[s]], check=True, stdout=subprocess.DEVNULL)
        for r in range(args.runs):
            run = {}
            for s in solvers:  # schedules take turns within a run: A B C A B C ...
                summary = os.path.join(folder, f"summary-{r}-{s}.json")
                subprocess.run([args.memopt, "run", "--profile", args.profile, "--schedule", schedules[s],
                                "--steps", str(args.steps), "--op-times", "--summary-out", summary],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(summary) as f:
                    line = json.loads(f.readline())
                run[s] = {"step_ratio": line["measured"]["time_ms"] / line["predicted"]["time_ms"],
                          "predicted_peak_bytes": line["predicted"]["peak_bytes"],
                          "contexts": {row["context"]: row for row in line["op_times"]}}
            runs.append(run)
            print(f"run {r + 1} of {args.runs} done", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump({"profile": args.profile, "solvers": solvers, "steps": args.steps, "runs": runs}, f, indent=1)
    print(f"{'schedule':22} {'where the ops ran':26} {'ops':>5} {'measured/predicted: median':>27} {'min':>7} {'max':>7}")
    for s in solvers:
        ratios = [run[s]["step_ratio"] for run in runs]
        peak = f"the whole step, {runs[0][s]['predicted_peak_bytes'] / 2**20:.0f} MiB"
        print(f"{s:22} {peak:26} {'':>5} {statistics.median(ratios):27.3f} {min(ratios):7.3f} {max(ratios):7.3f}")
        for context, row in runs[0][s]["contexts"].items():
            ratios = [run[s]["contexts"][context]["measured_ms"] / run[s]["contexts"][context]["predicted_ms"]
                      for run in runs if run[s]["contexts"][context]["predicted_ms"] > 0]
            if ratios:
                print(f"{'':22} {context:26} {row['num_ops']:5d} {statistics.median(ratios):27.3f} "
                      f"{min(ratios):7.3f} {max(ratios):7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

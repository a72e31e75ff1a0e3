"""fresh_runs.py: predicted against measured, run after run, each run a fresh pair of
processes -- `memopt profile`, then `memopt tradeoff --run` on that profile -- as a new
user runs the demo. Reports, per schedule, measured over predicted time across the runs
(median, min, max) and each schedule's time overhead over store-all, measured against
predicted, in points; and how many runs hold store-all within 5% and every schedule
within 10%. With --variant NAME=FLAGS (repeatable), each run measures every variant --
the tradeoff flags FLAGS added -- one after another, so that variants share the
machine's slow and fast spells (A B A B ...). Where the tradeoff also predicted each
schedule from stage times taken in its measured rounds (`predicted_in_rounds_ms`,
docs/measurement.md, "Stage times from the measured rounds"), those predictions are
summarized too, as the variant's NAME + IN_ROUNDS: the same measured steps against
the other prediction. Writes one JSON; prints a table per variant.

  .venv/bin/python tools/fresh_runs.py --runs 10 --out out/fresh/tiny.json \\
      --profile-args "--preset tiny --emulate h100-sxm:pcie5" \\
      --tradeoff-args "--budgets 30%:100%:10% --steps 6" \\
      --variant "this process=" --variant "profile times=--profile-times"
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


IN_ROUNDS = ", times from the rounds"
# Without --variant, the two predictions of each run.
DEFAULT_LABELS = {"": "times from before the rounds", IN_ROUNDS: "times from the rounds"}


def one_run(memopt, profile_args, tradeoff_args, folder):
    """{"": the run against the plans' predictions, IN_ROUNDS: against the predictions
    from stage times taken in the measured rounds, where the tradeoff made them}."""
    profile = os.path.join(folder, "profile.json")
    report = os.path.join(folder, "tradeoff")
    subprocess.run([memopt, "profile", *profile_args, "--out", profile], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([memopt, "tradeoff", "--profile", profile, *tradeoff_args, "--run", "--no-plot", "--out", report],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(report, "tradeoff.json")) as f:
        t = json.load(f)
    base = t["measured_base"]["time_ms"]
    out = {}
    for suffix, base_predicted, predicted_of in (
            ("", t["base_time_ms"], lambda p: p["predicted"]["time_ms"]),
            (IN_ROUNDS, t["measured_base"].get("predicted_in_rounds_ms"), lambda p: p["measured"]["predicted_in_rounds_ms"])):
        if base_predicted is None:
            continue
        rows = {}
        for p in t["points"]:
            m = p.get("measured")
            if p["status"] != "ok" or m is None or m.get("same_ops_as"):
                continue
            key = f"{p['solver']}@{100 * p['budget_bytes'] / t['store_all_peak_bytes']:.0f}%"
            predicted = predicted_of(p)
            rows[key] = {"ratio": m["time_ms"] / predicted,
                         "overhead_error_points": 100 * ((m["time_ms"] / base - 1) - (predicted / base_predicted - 1))}
        out[suffix] = {"store_all_ratio": base / base_predicted, "schedules": rows,
                       "predicted_times": t.get("predicted_times", "profile") if not suffix else "the measured rounds"}
    return out


def summarize(runs):
    keys = sorted({k for run in runs for k in run["schedules"]})
    table = {}
    for k in keys:
        ratios = [run["schedules"][k]["ratio"] for run in runs if k in run["schedules"]]
        errors = [run["schedules"][k]["overhead_error_points"] for run in runs if k in run["schedules"]]
        table[k] = {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                    "overhead_error_points_median": statistics.median(errors),
                    "overhead_error_points_max": max(abs(e) for e in errors),
                    "runs_within_5_points": sum(abs(e) <= 5 for e in errors), "runs": len(ratios)}
    store_all = [run["store_all_ratio"] for run in runs]
    holds = sum(abs(run["store_all_ratio"] - 1) <= 0.05 and
                all(abs(v["ratio"] - 1) <= 0.10 for v in run["schedules"].values()) for run in runs)
    overhead_holds = sum(all(abs(v["overhead_error_points"]) <= 5 for v in run["schedules"].values()) for run in runs)
    return {"runs": runs, "schedules": table,
            "store_all_ratio": {"median": statistics.median(store_all), "min": min(store_all), "max": max(store_all)},
            "runs_holding_5_and_10_percent": holds, "runs_holding_overheads_within_5_points": overhead_holds,
            "num_runs": len(runs)}


def print_table(name, v):
    source = {"profile": "the profile", "this process": "this process, before the measured rounds"}
    times = v["runs"][0]["predicted_times"]
    print(f"\n{name}: predicted from stage times of {source.get(times, times)}")
    # Overhead error: measured minus predicted overhead over store-all, in points; its
    # median, its largest size, and in how many runs it was within 5 points.
    print(f"{'schedule':<26} {'measured/predicted: median':>27} {'min':>7} {'max':>7} "
          f"{'overhead err (pts): median':>27} {'max |err|':>10} {'runs within 5':>14}")
    sa = v["store_all_ratio"]
    print(f"{'store-all':<26} {sa['median']:>27.3f} {sa['min']:>7.3f} {sa['max']:>7.3f}")
    for k, row in v["schedules"].items():
        # Files written before the median and the count were recorded have neither.
        median = row.get("overhead_error_points_median")
        median_text = "" if median is None else f"{median:+.1f}"
        within = row.get("runs_within_5_points")
        within_text = "" if within is None else f"{within} of {row['runs']}"
        print(f"{k:<26} {row['ratio_median']:>27.3f} {row['ratio_min']:>7.3f} {row['ratio_max']:>7.3f} "
              f"{median_text:>27} {row['overhead_error_points_max']:>10.1f} {within_text:>14}")
    print(f"runs with store-all within 5% and every schedule within 10%: {v['runs_holding_5_and_10_percent']} of "
          f"{v['num_runs']}; with every overhead within 5 points: {v['runs_holding_overheads_within_5_points']} of "
          f"{v['num_runs']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memopt", default="build/tools/memopt")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--profile-args", default="--preset tiny --emulate h100-sxm:pcie5")
    ap.add_argument("--tradeoff-args", default="--budgets 30%:100%:10% --steps 6")
    ap.add_argument("--variant", action="append", default=[], help="NAME=extra tradeoff flags; repeatable")
    ap.add_argument("--out", help="where to write the runs and their summary (JSON); needed unless --from-json")
    ap.add_argument("--from-json", metavar="FILE",
                    help="run nothing: summarize the runs a JSON of this script holds again, and print its tables")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        print(f"runs of: {saved['command']}")
        for name, v in saved["variants"].items():
            print_table(name, summarize(v["runs"]))
        return
    if not args.out:
        ap.error("--out is required (or --from-json FILE to summarize runs already made)")
    variants = [v.split("=", 1) for v in args.variant] or [["default", ""]]
    runs = {}  # variant name (+ IN_ROUNDS) -> its runs
    for r in range(args.runs):
        for name, flags in variants:
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory() as folder:
                results = one_run(args.memopt, shlex.split(args.profile_args),
                                  shlex.split(args.tradeoff_args) + shlex.split(flags), folder)
            for suffix, last in results.items():
                label = name + suffix if args.variant else DEFAULT_LABELS[suffix]
                runs.setdefault(label, []).append(last)
                worst = max(abs(v["ratio"] - 1) for v in last["schedules"].values())
                print(f"[fresh] run {r + 1}/{args.runs} {label}: store-all {last['store_all_ratio']:.3f}, "
                      f"worst schedule off by {100 * worst:.1f}% ({time.monotonic() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
    out = {"command": " ".join(shlex.quote(a) for a in sys.argv),
           "variants": {name: summarize(v) for name, v in runs.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    for name, v in out["variants"].items():
        print_table(name, v)


if __name__ == "__main__":
    main()

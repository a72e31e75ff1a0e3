"""solver_compare.py: memopt's recompute DP (`recompute-only`) against rotor's published
recurrence as memopt renders it (`rotor-compat`), on block-dominated chains: alternating
attention and MLP halves of GPT-2 small's width (B=8, T=1024, C=768, fp32), each stage's
times and bytes varied by +-10%, a chunked loss's small head -- the shape of the solver
benchmark's block_dominated_chain. For each length L and thread count, each solver runs
through memopt.solve (the C++ solver, from JSON text to schedule JSON) in one process, in
interleaved rounds (A B A B ...) after a warm-up, and the plan's predicted step time is
read from its schedule.
Reports the median and interquartile range of the wall time, the predicted time, and
the exponents of time in L between consecutive lengths and in slots between
consecutive slot counts (at --slots-length). Writes JSON and a Markdown table.

  .venv/bin/python tools/solver_compare.py --out results/solver-compare
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_json import quartiles  # noqa: E402  (the report scripts' one quartile rule)

import memopt  # noqa: E402

B, T, C, F32 = 8, 1024, 768, 4
ACT = B * T * C * F32


def block_dominated_profile(length: int, seed: int = 7) -> dict:
    """A profile (docs/formats.md, "profile.json") of `length` stages: embed,
    alternating attention and MLP halves, head."""
    rng = random.Random(seed)
    wobble = lambda v: v * rng.uniform(0.9, 1.1)  # noqa: E731
    stages = [{"name": "embed", "fwd_ms": 1.9, "bwd_ms": 3.1, "out_bytes": ACT, "saved_bytes": ACT,
               "fwd_tmp_bytes": 0, "bwd_tmp_bytes": ACT}]
    for i in range(length - 2):
        layer = i // 2
        if i % 2 == 0:  # attention: q, k, v, probabilities and the projection's input
            stages.append({"name": f"h.{layer}.attn", "fwd_ms": wobble(17.0), "bwd_ms": wobble(35.0),
                           "out_bytes": ACT, "saved_bytes": int(wobble(6 * ACT + ACT / 3)),
                           "fwd_tmp_bytes": int(wobble(3 * ACT)), "bwd_tmp_bytes": int(wobble(4 * ACT))})
        else:  # MLP: the 4C hidden before and after GELU
            stages.append({"name": f"h.{layer}.mlp", "fwd_ms": wobble(21.0), "bwd_ms": wobble(42.0),
                           "out_bytes": ACT, "saved_bytes": int(wobble(9 * ACT)),
                           "fwd_tmp_bytes": int(wobble(4 * ACT)), "bwd_tmp_bytes": int(wobble(5 * ACT))})
    stages.append({"name": "head", "fwd_ms": 9.5, "bwd_ms": 19.0, "out_bytes": F32, "saved_bytes": ACT + ACT // 8,
                   "fwd_tmp_bytes": ACT // 4, "bwd_tmp_bytes": ACT // 2})
    return {"format": "memopt.profile", "version": 1, "model": {"name": "block-dominated", "stages": length},
            "measured": False, "input_bytes": B * T * 8, "loss": {"bwd_ms": 0.0, "bwd_tmp_bytes": 0},
            "stages": stages}


def solve_once(profile_text, solver, threads, budget, slots):
    start = time.perf_counter()
    schedule = memopt.solve(json.loads(profile_text), budget, solver=solver, slots=slots, threads=threads)
    return (time.perf_counter() - start) * 1e3, schedule["predicted"]["time_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="48,96,192")
    ap.add_argument("--threads", default="1,0", help="thread counts, comma-separated (0: all cores)")
    ap.add_argument("--budget", default="40%")
    ap.add_argument("--slots", type=int, default=500)
    ap.add_argument("--slot-counts", default="250,1000",
                    help="further slot counts, comma-separated, timed at --slots-length for the exponent in slots")
    ap.add_argument("--slots-length", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    solvers = ["recompute-only", "rotor-compat"]
    rows = []
    cases = [(int(x), args.slots) for x in args.lengths.split(",")]
    cases += [(args.slots_length, int(x)) for x in args.slot_counts.split(",") if x]
    for length, slots in cases:
        profile = json.dumps(block_dominated_profile(length))
        for threads in [int(x) for x in args.threads.split(",")]:
            walls = {s: [] for s in solvers}
            predicted = {}
            for s in solvers:  # warm-up
                solve_once(profile, s, threads, args.budget, slots)
            for _ in range(args.rounds):
                for s in solvers:
                    ms, pred = solve_once(profile, s, threads, args.budget, slots)
                    walls[s].append(ms)
                    predicted[s] = pred
            for s in solvers:
                q1, median, q3 = quartiles(walls[s])
                rows.append({"L": length, "slots": slots, "threads": threads, "solver": s,
                             "wall_ms": {"median": median, "q1": q1, "q3": q3, "values": walls[s]},
                             "predicted_ms": predicted[s]})
                print(f"[compare] L={length} slots={slots} threads={threads or 'all'} {s}: {median:.0f} ms "
                      f"({q1:.0f}-{q3:.0f}), plan {predicted[s]:.1f} ms", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r["slots"] != args.slots, r["L"], r["slots"], r["threads"] == 0, r["solver"]))
    same = lambda a, b: a["solver"] == b["solver"] and a["threads"] == b["threads"]  # noqa: E731
    for r in rows:  # exponents from the next smaller length (same slots) and slot count (same length)
        before = [p for p in rows if same(p, r) and p["slots"] == r["slots"] and p["L"] < r["L"]]
        if before:
            p = max(before, key=lambda x: x["L"])
            r["exponent_in_L"] = math.log(r["wall_ms"]["median"] / p["wall_ms"]["median"]) / math.log(r["L"] / p["L"])
        fewer = [p for p in rows if same(p, r) and p["L"] == r["L"] and p["slots"] < r["slots"]]
        if fewer:
            p = max(fewer, key=lambda x: x["slots"])
            r["exponent_in_slots"] = (math.log(r["wall_ms"]["median"] / p["wall_ms"]["median"]) /
                                      math.log(r["slots"] / p["slots"]))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "solver_compare.json"), "w") as f:
        json.dump({"budget": args.budget, "slots": args.slots, "rounds": args.rounds, "rows": rows}, f, indent=2)
    lines = ["| L | slots | threads | solver | solve time, median (IQR) | exponent in L | exponent in slots | "
             "plan's predicted step |",
             "|---:|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        w = r["wall_ms"]
        exp = f"{r['exponent_in_L']:.2f}" if "exponent_in_L" in r else ""
        exp_slots = f"{r['exponent_in_slots']:.2f}" if "exponent_in_slots" in r else ""
        lines.append(f"| {r['L']} | {r['slots']} | {r['threads'] or 'all'} | {r['solver']} | {w['median']:.1f} ms "
                     f"({w['q1']:.1f}-{w['q3']:.1f}) | {exp} | {exp_slots} | {r['predicted_ms']:.1f} ms |")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

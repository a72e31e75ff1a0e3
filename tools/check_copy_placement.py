#!/usr/bin/env python3
"""check_copy_placement.py: holds `optimal` to the copy-placement MILP
(tools/copy_placement_milp.py) on random chains and on GPT-2 profiles, and writes
the table of results/copy-placement-milp.

    PYTHONPATH=build/python .venv/bin/python tools/check_copy_placement.py --out DIR
        [--lengths 6,8,10,12] [--chains 10] [--gpt2 PROFILE] [--links a100:pcie4,...]
        [--budgets 40%,50%,65%,80%] [--time-limit 60] [--jobs 1]

For each point (a chain and a budget) it takes compute-op sequences from memopt's own
plans (`optimal` at the budget; `optimal` and `recompute-only` at larger budgets on
random chains, where a plan that keeps more might fit with copies), finds the fastest
placement of copies and waits around each, checks that placement in memopt's
simulator, and compares the best with `optimal`'s plan. Progress goes to stderr, one
line per point as it ends. With `--jobs N`, N points are checked side by side (each MILP
on one thread); the chains, the points and the table are the same for every N, but a
MILP's 60 s limit counts wall time, so run no more jobs than idle cores.
"""
import argparse
import concurrent.futures
import csv
import json
import multiprocessing
import pathlib
import random
import sys
import time
from typing import List, Optional, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import copy_placement_milp as cpm  # noqa: E402

# Link rates in bytes/s that make every copy time an integer or a half ms on the
# random chains, so that no tie the simulator breaks exactly is blurred by the
# MILP's tolerances (1e-6).
RATES = (500, 1000, 2000)
# Larger budgets whose plans give compute-op sequences to try at a budget: the
# budget plus these eighths of the way to the store-all peak.
LARGER_EIGHTHS = (2, 4, 8)


def random_integer_profile(rng: random.Random, length: int) -> dict:
    """A chain with small integer sizes and times and a random link."""
    stages = []
    for i in range(length):
        out = rng.randint(1, 8)
        stages.append({"name": f"s{i}", "fwd_ms": rng.randint(1, 9), "fwd_nograd_ms": rng.randint(1, 9),
                       "bwd_ms": rng.randint(1, 9), "out_bytes": out, "saved_bytes": out + rng.randint(0, 8),
                       "fwd_tmp_bytes": rng.randint(0, 4), "fwd_keep_tmp_bytes": rng.randint(0, 4),
                       "bwd_tmp_bytes": rng.randint(-1, 4)})
    return {"format": "memopt.profile", "version": 1, "input_bytes": rng.randint(1, 8),
            "link": {"d2h_bytes_per_s": rng.choice(RATES), "h2d_bytes_per_s": rng.choice(RATES)},
            "loss": {"bwd_ms": rng.randint(0, 3), "bwd_tmp_bytes": rng.randint(0, 2)}, "stages": stages}


def plan_at(profile: dict, budget, solver: str, byte_slots: bool = False) -> dict:
    """`solver`'s plan at `budget`, or at the smallest budget it meets when that is
    larger. With `byte_slots` (an integer budget), one slot per byte: the DPs then
    round no size up (docs/formats.md, "Discretisation"), as in the oracle's tests."""
    import memopt
    try:
        if byte_slots:
            return memopt.solve(profile, str(budget), solver, slots=int(budget))
        return memopt.solve(profile, str(budget), solver)
    except ValueError:
        return memopt.solve(profile, "min", solver)


def schedule_with(profile: dict, ops, budget: int) -> dict:
    return {"format": "memopt.schedule", "version": 1, "budget_bytes": int(budget),
            "chain_length": len(profile["stages"]), "ops": [[k] if i < 0 else [k, i] for k, i in ops]}


def store_all_peak(profile: dict) -> int:
    return plan_at(profile, "100%", "store-all")["budget_bytes"]


def budget_range(profile: dict) -> Tuple[int, int]:
    """The smallest budget `optimal` meets and the store-all peak; ValueError when
    `optimal` meets none."""
    import memopt
    return memopt.solve(profile, "min", "optimal")["budget_bytes"], store_all_peak(profile)


def compute_sequences(profile: dict, plan: dict, larger: bool, byte_slots: bool = False) -> List[Tuple[str, List[cpm.Op]]]:
    """(where from, ops) of `optimal`'s plan and, with `larger`, of memopt's plans at
    larger budgets, one plan for each distinct sequence of compute ops. The MILP keeps a
    plan's compute ops and starts from its copies where they fit the budget."""
    out = {}
    plans = [("optimal", plan)]
    if larger:
        budget, high = plan["budget_bytes"], store_all_peak(profile)
        for eighth in LARGER_EIGHTHS:
            at = budget + (high - budget) * eighth // 8
            for solver in ("optimal", "recompute-only"):
                plans.append((f"{solver} at +{eighth}/8", plan_at(profile, at, solver, byte_slots)))
    for source, p in plans:
        ops = cpm.parse_ops(p)
        out.setdefault(tuple(cpm.compute_ops_of(ops)), (source, ops))
    return list(out.values())


def best_placement(profile: dict, budget: int, sequences, time_limit_s: float, kept_inputs: bool = True):
    """The fastest placement around each plan's compute ops, over the plans: a dict of
    its time, source, simulated time, whether it fits, the MILP's bound and status, or
    None; and whether every MILP was solved to optimality (or proven infeasible). Each
    placement is checked by memopt's simulator."""
    import memopt
    chain = cpm.chain_from_profile(profile)
    best: Optional[dict] = None
    proven = True
    for source, ops in sequences:
        result = cpm.check_plan(chain, ops, budget, time_limit_s, kept_inputs)
        if result.status not in ("Optimal", "Infeasible"):
            proven = False
        if result.best_ops is None:
            continue
        sim = memopt.simulate(profile, schedule_with(profile, result.best_ops, budget))
        found = {"ms": result.best_ms, "source": source, "sim_ms": sim["time_ms"],
                 "fits": sim["peak_bytes"] <= budget, "bound_ms": result.bound_ms, "status": result.status}
        if best is None or found["ms"] < best["ms"]:
            best = found
    return best, proven


def check_point(profile: dict, budget_text: str, larger: bool, time_limit_s: float, byte_slots: bool = False) -> dict:
    import memopt
    # No fallback to a larger budget here: the point is the budget asked for.
    slots = {"slots": int(budget_text)} if byte_slots else {}
    plan = memopt.solve(profile, budget_text, "optimal", **slots)
    budget = plan["budget_bytes"]
    optimal_ms = memopt.simulate(profile, plan)["time_ms"]
    sequences = compute_sequences(profile, plan, larger, byte_slots)
    started = time.perf_counter()
    best, proven = best_placement(profile, budget, sequences, time_limit_s)
    return {"budget_bytes": budget, "optimal_ms": optimal_ms, "sequences": len(sequences),
            "milp_ms": best["ms"] if best else None, "from": best["source"] if best else "",
            "simulated_ms": best["sim_ms"] if best else None, "fits": best["fits"] if best else None,
            "proven": proven, "seconds": time.perf_counter() - started}


def main(argv=None) -> int:
    import memopt
    from memopt import _core

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for points.csv and table.md")
    parser.add_argument("--lengths", default="6,8,10,12", help="random chain lengths (default 6,8,10,12)")
    parser.add_argument("--chains", type=int, default=10, help="random chains per length (default 10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gpt2", action="append", default=[], help="a GPT-2 profile.json (repeatable)")
    parser.add_argument("--links", default="v100:pcie3,a100:pcie4,h100-sxm:pcie5,gh200:nvlink-c2c")
    parser.add_argument("--budgets", default="40%,50%,65%,80%", help="budgets for the GPT-2 profiles")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per MILP solve (default 60)")
    parser.add_argument("--jobs", type=int, default=1, help="points checked side by side (default 1)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # Every point is drawn first, in one order, so that `--jobs` changes nothing but
    # which process checks it.
    points = []  # (case, budget text, profile, larger, byte slots)
    rng = random.Random(args.seed)
    for length in [int(v) for v in args.lengths.split(",") if v]:
        done = 0
        while done < args.chains:
            profile = random_integer_profile(rng, length)
            try:
                low, high = budget_range(profile)
            except ValueError:
                continue
            budget = rng.randint(low, high)
            points.append((f"random L={length} #{done}", str(budget), profile, True, True))
            done += 1
    for path in args.gpt2:
        text = pathlib.Path(path).read_text()
        for link in [v for v in args.links.split(",") if v]:
            profile = json.loads(_core.set_link(text, link))
            for budget in [v for v in args.budgets.split(",") if v]:
                points.append((f"{pathlib.Path(path).name.split('.')[0]} {link} (L={len(profile['stages'])})",
                               budget, profile, False, False))

    def report(case: str, budget_text: str, point: dict):
        gap = "" if point["milp_ms"] is None else f"{point['milp_ms'] - point['optimal_ms']:+.4f} ms"
        print(f"{case} {budget_text}: optimal {point['optimal_ms']:.4f} ms, best placement {point['milp_ms']} "
              f"({gap}, {point['sequences']} sequences, proven {point['proven']}, {point['seconds']:.1f} s)",
              file=sys.stderr, flush=True)

    results: List[Optional[dict]] = [None] * len(points)
    # Note [Spawned workers]: memopt's solver runs threads of its own, and a process
    # forked from one that has run them may inherit a held lock; spawned workers
    # import memopt afresh.
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(check_point, profile, budget_text, larger, args.time_limit, byte_slots): k
                   for k, (case, budget_text, profile, larger, byte_slots) in enumerate(points)}
        for future in concurrent.futures.as_completed(futures):
            k = futures[future]
            case, budget_text = points[k][0], points[k][1]
            try:
                results[k] = future.result()
            except ValueError as e:  # a GPT-2 budget below its smallest feasible one
                print(f"{case} {budget_text}: skipped: {e}", file=sys.stderr, flush=True)
                continue
            report(case, budget_text, results[k])
    rows = [{"case": p[0], "budget": p[1], **r} for p, r in zip(points, results) if r is not None]

    with open(out / "points.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "table.md", "w") as f:
        f.write("| case | budget | optimal (ms) | best placement (ms) | from | simulated (ms) | fits | proven | s |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            milp = "-" if r["milp_ms"] is None else f"{r['milp_ms']:.4f}"
            sim = "-" if r["simulated_ms"] is None else f"{r['simulated_ms']:.4f}"
            f.write(f"| {r['case']} | {r['budget']} | {r['optimal_ms']:.4f} | {milp} | {r['from']} | {sim} | "
                    f"{r['fits']} | {r['proven']} | {r['seconds']:.1f} |\n")
    faster = [r for r in rows if r["milp_ms"] is not None and r["milp_ms"] < r["optimal_ms"] - 1e-4]
    print(f"{len(rows)} points; the MILP beat optimal at {len(faster)}; all proven: "
          f"{all(r['proven'] for r in rows)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

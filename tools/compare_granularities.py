#!/usr/bin/env python3
"""compare_granularities.py: `optimal` on blocks against `optimal` on operator stages,
budget by budget, from two `memopt tradeoff` reports of the same model (the block
profile's budgets in bytes given to both).

    python tools/compare_granularities.py BLOCK_DIR OP_DIR [--label TEXT] [--peak]

Prints one markdown row per budget (predicted step time of each, and the operator
stages' time relative to the blocks'), then the counts: where operator stages are
faster, equal, slower, and where only one of them has a plan. With --peak, each row
also gives the operator-stage plan's predicted peak and how many times smaller it is
than the block report's store-all peak.
"""
import argparse
import json
import sys


def load(folder: str) -> dict:
    with open(f"{folder}/tradeoff.json") as f:
        return json.load(f)


def optimal_points(report: dict) -> dict:
    """budget in bytes -> `optimal`'s predicted {time_ms, peak_bytes} at it."""
    return {p["budget_bytes"]: p["predicted"]
            for p in report["points"] if p["solver"] == "optimal" and p["status"] == "ok"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("block_dir")
    parser.add_argument("op_dir")
    parser.add_argument("--label", default="", help="a first column for every row")
    parser.add_argument("--peak", action="store_true",
                        help="add the operator-stage plan's peak and its saving over store-all")
    args = parser.parse_args(argv)
    try:
        block_report = load(args.block_dir)
        blocks, ops = optimal_points(block_report), optimal_points(load(args.op_dir))
        store_all_peak = block_report["store_all_peak_bytes"]
    except (OSError, KeyError, ValueError) as e:
        print(f"compare_granularities: {e} (both folders must hold a memopt tradeoff report with `optimal`)",
              file=sys.stderr)
        return 2
    faster = equal = slower = only_blocks = only_ops = 0
    worst = 0.0
    for budget in sorted(set(blocks) | set(ops)):
        b, o = blocks.get(budget), ops.get(budget)
        if b is None or o is None:
            only_blocks += o is None
            only_ops += b is None
            continue
        rel = o["time_ms"] / b["time_ms"] - 1
        faster += rel < -1e-12
        equal += abs(rel) <= 1e-12
        slower += rel > 1e-12
        worst = max(worst, rel)
        row = f"| {args.label} | {budget / 2**30:.2f} GiB | {b['time_ms']:.3f} | {o['time_ms']:.3f} | {100 * rel:+.2f}% |"
        if args.peak:
            row += f" {o['peak_bytes'] / 2**30:.2f} GiB ({store_all_peak / o['peak_bytes']:.2f}x) |"
        print(row)
    by = f" (by up to {100 * worst:.2f}%)" if slower else ""
    print(f"{args.label}: operator stages faster at {faster}, equal at {equal}, slower at {slower}{by}; "
          f"a plan only on blocks at {only_blocks}, only on operator stages at {only_ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

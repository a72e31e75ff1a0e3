#!/usr/bin/env python3
"""compare_granularities.py: `optimal` on blocks against `optimal` on operator stages,
budget by budget, from two `memopt tradeoff` reports of the same model (the block
profile's budgets in bytes given to both).

    python tools/compare_granularities.py BLOCK_DIR OP_DIR [--label TEXT]

Prints one markdown row per budget (predicted step time of each, and the operator
stages' time relative to the blocks'), then the counts: where operator stages are
faster, equal, slower, and where only one of them has a plan.
"""
import argparse
import json
import sys


def optimal_times(folder: str) -> dict:
    with open(f"{folder}/tradeoff.json") as f:
        report = json.load(f)
    return {p["budget_bytes"]: p["predicted"]["time_ms"]
            for p in report["points"] if p["solver"] == "optimal" and p["status"] == "ok"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("block_dir")
    parser.add_argument("op_dir")
    parser.add_argument("--label", default="", help="a first column for every row")
    args = parser.parse_args(argv)
    try:
        blocks, ops = optimal_times(args.block_dir), optimal_times(args.op_dir)
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
        rel = o / b - 1
        faster += rel < -1e-12
        equal += abs(rel) <= 1e-12
        slower += rel > 1e-12
        worst = max(worst, rel)
        print(f"| {args.label} | {budget / 2**30:.2f} GiB | {b:.3f} | {o:.3f} | {100 * rel:+.2f}% |")
    print(f"{args.label}: operator stages faster at {faster}, equal at {equal}, slower at {slower} "
          f"(by up to {100 * worst:.2f}%); a plan only on blocks at {only_blocks}, only on operator stages at {only_ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

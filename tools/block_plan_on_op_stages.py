#!/usr/bin/env python3
"""block_plan_on_op_stages.py: a schedule made for a GPT-2 block profile, written out on
the operator-stage profile of the same model, so that `memopt simulate` can say what the
block plan costs at operator granularity.

    python tools/block_plan_on_op_stages.py BLOCK_SCHEDULE BLOCK_PROFILE OP_PROFILE \\
        --out OP_SCHEDULE [--link-out OP_PROFILE_COPY --bandwidth BYTES_PER_S]

Each block stage stands for the operator stages whose names start with its name ("h.3"
for "h.3.ln_1" .. "h.3.mlp.c_proj"; "embed" and "head" for themselves). Every op of a
block becomes the same op on each of its operator stages (forwards in order, backwards
in reverse; `fwd_ckpt` checkpoints the first and drops the rest). A block's
`offload_saved` (everything it saved but its output) becomes, on each of its operator
stages, `offload_input` of that stage's input where it has bytes of its own (but the
block's input, which the block kept) and `offload_saved` of its output where it saved
more than its output; `prefetch_saved` brings the same back in reverse. The copies then
queue on the link one behind the other, as the block's one copy would have run. The
result is a schedule like any other: `memopt simulate` checks it and gives its peak and
time. With --link-out, a copy of OP_PROFILE whose link is BYTES_PER_S each way is written
too, for links the profile does not have (`memopt solve --bandwidth` for the block plan).
"""
import argparse
import json
import sys


def load(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"block_plan_on_op_stages: {path}: {e} (expected a memopt {what})")


def group_stages(block_profile: dict, op_profile: dict) -> list:
    """For each block stage, the indices of its operator stages, in order."""
    op_names = [s["name"] for s in op_profile["stages"]]
    groups, k = [], 0
    for b, stage in enumerate(block_profile["stages"]):
        name = stage["name"]
        start = k
        while k < len(op_names) and (op_names[k] == name or op_names[k].startswith(name + ".")):
            k += 1
        if k == start:
            raise SystemExit(f"block_plan_on_op_stages: block stage {b} ({name}) has no operator stage named "
                             f"{name} or {name}.*; at operator stage {k} the op profile has "
                             f"{op_names[k] if k < len(op_names) else 'no more stages'}: are both profiles of one model?")
        groups.append(list(range(start, k)))
    if k != len(op_names):
        raise SystemExit(f"block_plan_on_op_stages: operator stages {k}.. ({op_names[k]}) belong to no block stage")
    return groups


def translate(block_schedule: dict, op_profile: dict, groups: list) -> list:
    stages = op_profile["stages"]
    length = len(stages)

    def x(k):  # bytes of a_k
        return op_profile["input_bytes"] if k == 0 else stages[k - 1]["out_bytes"]

    def carried(k):  # c_k, docs/formats.md, "Carried bytes"
        return stages[k - 1].get("carried_bytes", 0) if 1 <= k <= length else 0

    def moves(block):  # what the block's offload_saved becomes, in issue order
        out = []
        for k in groups[block]:
            if k != groups[block][0] and x(k) - max(carried(k), carried(k + 1)) > 0:
                out.append(["offload_input", k])
            if stages[k]["saved_bytes"] > stages[k]["out_bytes"]:
                out.append(["offload_saved", k + 1])
        return out

    ops = []
    for op in block_schedule["ops"]:
        kind, b = op[0], (op[1] if len(op) > 1 else None)
        if b is None:
            ops.append([kind])
        elif kind in ("fwd_keep", "fwd_drop"):
            ops += [[kind, k] for k in groups[b]]
        elif kind == "fwd_ckpt":
            ops += [["fwd_ckpt", groups[b][0]]] + [["fwd_drop", k] for k in groups[b][1:]]
        elif kind == "bwd":
            ops += [["bwd", k] for k in reversed(groups[b])]
        elif kind == "offload_saved":
            ops += moves(b - 1)
        elif kind == "prefetch_saved":
            ops += [["prefetch_input" if m[0] == "offload_input" else "prefetch_saved", m[1]]
                    for m in reversed(moves(b - 1))]
        else:
            raise SystemExit(f"block_plan_on_op_stages: op {op} has no operator-stage counterpart here "
                             "(this tool writes out keep, recompute and saved-state moves)")
    return ops


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("block_schedule")
    parser.add_argument("block_profile")
    parser.add_argument("op_profile")
    parser.add_argument("--out", required=True, help="where to write the operator-stage schedule")
    parser.add_argument("--link-out", help="also write OP_PROFILE with its link set to --bandwidth here")
    parser.add_argument("--bandwidth", type=float, help="bytes per second each way, with --link-out")
    args = parser.parse_args(argv)
    if (args.link_out is None) != (args.bandwidth is None):
        parser.error("--link-out and --bandwidth go together")
    block_schedule = load(args.block_schedule, "schedule")
    block_profile, op_profile = load(args.block_profile, "profile"), load(args.op_profile, "profile")
    if block_schedule.get("chain_length") != len(block_profile["stages"]):
        raise SystemExit(f"block_plan_on_op_stages: {args.block_schedule} is for {block_schedule.get('chain_length')} "
                         f"stages, {args.block_profile} has {len(block_profile['stages'])}")
    groups = group_stages(block_profile, op_profile)
    ops = translate(block_schedule, op_profile, groups)
    out = {"format": "memopt.schedule", "version": 1, "solver": block_schedule.get("solver", "optimal"),
           "budget_bytes": block_schedule["budget_bytes"], "chain_length": len(op_profile["stages"]), "ops": ops}
    with open(args.out, "w") as f:
        json.dump(out, f)
    if args.link_out:
        op_profile["link"] = {"d2h_bytes_per_s": args.bandwidth, "h2d_bytes_per_s": args.bandwidth}
        with open(args.link_out, "w") as f:
            json.dump(op_profile, f)
    print(f"wrote {args.out}: {len(ops)} ops on {len(op_profile['stages'])} operator stages")
    return 0


if __name__ == "__main__":
    sys.exit(main())

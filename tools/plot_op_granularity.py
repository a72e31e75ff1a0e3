#!/usr/bin/env python3
"""plot_op_granularity.py: activation memory saved at a given predicted overhead,
blocks as stages against operator stages, from `memopt tradeoff` reports made on the
same byte budgets (tools/make_op_granularity_report.sh).

  tools/plot_op_granularity.py --out DIR --case LABEL BLOCK/tradeoff.json OP/tradeoff.json ...

For each plan family, the smallest predicted peak among its plans whose predicted
time is within 5% (10%) of the step with everything kept (store-all's time, the same
at both granularities: the same kernels, cut differently). "Saved" is the block
profile's store-all peak over that peak. Families: the DP on blocks, the DP on
operator stages, selective (recompute every attention core) and pointwise (recompute
every layer norm and GELU), both on operator stages.
Writes savings.md, savings.png (every case), tradeoff.png (time against memory, first
case) and stage_map.png (the operator-stage DP's plan within 10%, first case).
"""
import argparse
import json
import os

FAMILIES = [  # label, granularity, solver
    ("DP, blocks", "block", "recompute-only"),
    ("DP, operator stages", "op", "recompute-only"),
    ("selective (Megatron)", "op", "selective"),
    ("pointwise", "op", "pointwise"),
]
THRESHOLDS = (0.05, 0.10)


def load(path):
    with open(path) as f:
        return json.load(f)


def ok_points(report, solver):
    return [p for p in report["points"] if p["solver"] == solver and p.get("status") == "ok"]


def smallest_within(points, base_ms, overhead):
    """The point with the least predicted peak whose time is within the overhead."""
    fitting = [p for p in points if p["predicted"]["time_ms"] <= base_ms * (1 + overhead) * (1 + 1e-12)]
    return min(fitting, key=lambda p: p["predicted"]["peak_bytes"]) if fitting else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", nargs=3, action="append", metavar=("LABEL", "BLOCK_JSON", "OP_JSON"), required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    results = []  # (label, reference peak, {family: {threshold: point}})
    for label, block_path, op_path in args.case:
        reports = {"block": load(block_path), "op": load(op_path)}
        base_ms = reports["block"]["base_time_ms"]
        if abs(reports["op"]["base_time_ms"] - base_ms) > 1e-9 * base_ms:
            raise SystemExit(f"{label}: the two profiles' step times differ ({base_ms} vs {reports['op']['base_time_ms']} ms)")
        reference = reports["block"]["store_all_peak_bytes"]
        found = {}
        for family, granularity, solver in FAMILIES:
            pts = ok_points(reports[granularity], solver)
            found[family] = {t: smallest_within(pts, base_ms, t) for t in THRESHOLDS}
        results.append((label, reference, found, reports))

    gib = 2.0 ** 30
    with open(os.path.join(args.out, "savings.md"), "w") as f:
        f.write("Activation memory saved (block store-all peak / the plan's peak) at <= 5% and <= 10% predicted "
                "overhead; the plan's peak in GiB beside it. MODELED: `memopt estimate` profiles, bf16, B=8, T=1024.\n\n")
        f.write("| case | block store-all | " + " | ".join(f"{fam} <= {int(t * 100)}%" for fam, _, _ in FAMILIES
                                                    for t in THRESHOLDS) + " |\n")
        f.write("|---|---|" + "---|" * (len(FAMILIES) * len(THRESHOLDS)) + "\n")
        for label, reference, found, _ in results:
            cells = []
            for family, _, _ in FAMILIES:
                for t in THRESHOLDS:
                    p = found[family][t]
                    cells.append("-" if p is None else
                                 f"{reference / p['predicted']['peak_bytes']:.2f}x ({p['predicted']['peak_bytes'] / gib:.1f})")
            f.write(f"| {label} | {reference / gib:.1f} GiB | " + " | ".join(cells) + " |\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # savings.png: one panel per threshold, a group of bars per case.
    fig, axes = plt.subplots(1, len(THRESHOLDS), figsize=(13, 4.8), sharey=True)
    width = 0.8 / len(FAMILIES)
    for ax, t in zip(axes, THRESHOLDS):
        for k, (family, _, _) in enumerate(FAMILIES):
            ys = [0 if r[2][family][t] is None else r[1] / r[2][family][t]["predicted"]["peak_bytes"] for r in results]
            ax.bar([i + (k - (len(FAMILIES) - 1) / 2) * width for i in range(len(results))], ys, width, label=family)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(results)))
        ax.set_xticklabels([r[0].replace(", ", "\n") for r in results], fontsize=7)
        ax.set_title(f"within {int(t * 100)}% predicted overhead")
        ax.set_ylabel("memory saved (x, vs block store-all)")
    axes[0].legend(fontsize=8)
    fig.suptitle("MODELED: activation memory saved, blocks vs operator stages (0 = no plan within the overhead)")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "savings.png"), dpi=130)
    plt.close(fig)

    # tradeoff.png: predicted overhead against peak, first case.
    label, reference, found, reports = results[0]
    base_ms = reports["block"]["base_time_ms"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for family, granularity, solver in FAMILIES:
        pts = sorted(ok_points(reports[granularity], solver), key=lambda p: p["predicted"]["peak_bytes"])
        ax.plot([p["predicted"]["peak_bytes"] / gib for p in pts],
                [100 * (p["predicted"]["time_ms"] / base_ms - 1) for p in pts], marker=".", label=family)
    for t in THRESHOLDS:
        ax.axhline(100 * t, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("predicted activation peak (GiB)")
    ax.set_ylabel("predicted overhead over store-all's step (%)")
    ax.set_title(f"MODELED {label}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "tradeoff.png"), dpi=130)
    plt.close(fig)

    # stage_map.png: what the operator-stage DP does with each operator of each block.
    p = found["DP, operator stages"][0.10]
    if p is not None:
        names = reports["op"]["stage_names"]
        ops = [n.split(".", 2)[2] for n in names if n.startswith("h.0.")]
        blocks = sorted({int(n.split(".")[1]) for n in names if n.startswith("h.")})
        colors = {"kept": 0, "checkpointed": 1, "recomputed": 2}
        grid = [[0] * len(ops) for _ in blocks]
        for name, stage in zip(names, p["stages"]):
            if name.startswith("h."):
                _, b, op = name.split(".", 2)
                grid[int(b)][ops.index(op)] = colors.get(stage["category"], 3)
        fig, ax = plt.subplots(figsize=(6, 8))
        from matplotlib.colors import ListedColormap
        ax.imshow(grid, aspect="auto", cmap=ListedColormap(["#4c72b0", "#dd8452", "#c44e52", "#999999"]),
                  vmin=0, vmax=3, interpolation="nearest")
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels(ops, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("block")
        ax.set_title(f"MODELED {label}: DP on operator stages within 10%\n"
                     f"peak {p['predicted']['peak_bytes'] / gib:.1f} GiB; blue kept, orange checkpointed "
                     "(input kept, recomputed), red recomputed", fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "stage_map.png"), dpi=130)
        plt.close(fig)


if __name__ == "__main__":
    main()

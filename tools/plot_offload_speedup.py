#!/usr/bin/env python3
"""plot_offload_speedup.py: how much faster than recompute-only two versions of
`optimal` are, budget by budget, from `memopt tradeoff` reports (tradeoff.json) made
with --solvers optimal,recompute-only. Writes a Markdown table and one figure.

  tools/plot_offload_speedup.py --out DIR \\
      --case "GPT-2 small, H100, PCIe 5 (50 GB/s)" OLD/tradeoff.json NEW/tradeoff.json ...

Speed-up = recompute-only time / optimal time - 1 (0 when optimal keeps the same
plan); budgets where recompute-only finds nothing are left out of the ratio.
"""
import argparse
import json
import os


def times(report):
    """{budget_bytes: {solver: time_ms}} for the points that solved."""
    out = {}
    for p in report["points"]:
        if p.get("status") == "ok":
            out.setdefault(p["budget_bytes"], {})[p["solver"]] = p["predicted"]["time_ms"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for speedup.md and speedup.png")
    ap.add_argument("--case", nargs=3, action="append", metavar=("LABEL", "OLD_JSON", "NEW_JSON"), required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rows, curves = [], []
    for label, old_path, new_path in args.case:
        with open(old_path) as f:
            old = json.load(f)
        with open(new_path) as f:
            new = json.load(f)
        peak = new["store_all_peak_bytes"]
        t_old, t_new = times(old), times(new)
        xs, ys_old, ys_new = [], [], []
        for budget in sorted(set(t_old) | set(t_new)):
            rec = t_new.get(budget, {}).get("recompute-only")
            o_old = t_old.get(budget, {}).get("optimal")
            o_new = t_new.get(budget, {}).get("optimal")
            pct = round(100.0 * budget / peak)
            fmt = lambda v: "-" if v is None else f"{v:.1f}"
            gain = lambda v: None if v is None or rec is None else 100.0 * (rec / v - 1.0)
            g_old, g_new = gain(o_old), gain(o_new)
            rows.append((label, pct, fmt(rec), fmt(o_old), fmt(o_new),
                         "-" if g_old is None else f"{g_old:.1f}%", "-" if g_new is None else f"{g_new:.1f}%"))
            if g_old is not None and g_new is not None:
                xs.append(pct); ys_old.append(g_old); ys_new.append(g_new)
        curves.append((label, xs, ys_old, ys_new))

    with open(os.path.join(args.out, "speedup.md"), "w") as f:
        f.write("| case | budget (% of store-all) | recompute-only (ms) | optimal, old (ms) | optimal, new (ms) "
                "| old vs recompute-only | new vs recompute-only |\n|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| " + " | ".join(str(v) for v in r) + " |\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ncols = min(4, len(curves))  # four panels to a row at most
    nrows = (len(curves) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), squeeze=False, sharey=True)
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    for ax, (label, xs, ys_old, ys_new) in zip(axes.flat, curves):
        ax.plot(xs, ys_old, "o--", label="optimal, before")
        ax.plot(xs, ys_new, "s-", label="optimal, after")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("budget (% of the store-all peak)")
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("faster than recompute-only (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "speedup.png"), dpi=120)


if __name__ == "__main__":
    main()

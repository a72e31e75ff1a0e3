#!/usr/bin/env python3
"""plot_fit.py: the figure of a `memopt estimate --fit-chart` report, from its fit.json.

    .venv/bin/python tools/plot_fit.py DIR/fit.json --out DIR

`memopt estimate --fit-chart` runs this itself when the venv exists. Writes
fit_chart.png and .svg: MODELED activation memory of each strategy versus batch size
(left) and sequence length (right), with the GPU's memory left for activations
(memory - static - reserve) as a limit line and the largest batch / sequence of
store-all and of optimal at <= 10% overhead marked. Plotting only.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = 2 ** 30
COLORS = {"store-all": "#7f7f7f", "sqrt": "#2ca02c", "recompute-blocks": "#1f77b4", "offload-all": "#8c564b",
          "recompute-all": "#9467bd", "optimal<=10%": "#d62728", "optimal": "#ff7f0e"}
STYLES = {"store-all": "-", "sqrt": "-", "recompute-blocks": "-.", "offload-all": ":", "recompute-all": "-",
          "optimal<=10%": "-", "optimal": "--"}


def panel(ax, r, rows, key, largest, fixed_label):
    x = [row[key] for row in rows]
    for s in r["strategies"]:
        pts = [(row[key], row["peak_bytes"][s] / GIB) for row in rows if s in row["peak_bytes"]]
        if not pts:
            continue
        label = s
        if s == "optimal<=10%":
            label = f"optimal, overhead <= {100 * r['max_overhead']:.0f}%"
        elif s == "optimal":
            label = "optimal, any overhead (its minimum)"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], STYLES.get(s, "-"), color=COLORS.get(s), marker="o", ms=3.5,
                lw=3 if s == "optimal<=10%" else 1.6, label=label)
    limit = r["limit_bytes"] / GIB
    ax.axhline(limit, color="black", ls="--", lw=1.4,
               label=f"available: {r['memory_bytes'] / GIB:.0f} GiB - static {r['static_bytes'] / GIB:.1f} - reserve "
                     f"{r['reserve_bytes'] / GIB:.1f} = {limit:.1f} GiB")
    for s, c in (("store-all", COLORS["store-all"]), ("optimal<=10%", COLORS["optimal<=10%"])):
        v = largest.get(s, 0)
        if v > 0:
            ax.axvline(v, color=c, lw=1, alpha=0.8)
            ax.annotate(f"largest, {'store-all' if s == 'store-all' else 'optimal <=10%'}: {v}", (v, limit),
                        xytext=(4, 10 if s == "store-all" else -18), textcoords="offset points", fontsize=7.5, color=c)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([str(v) for v in x], fontsize=7.5)
    ax.set_xlabel(("batch size B (sequences)" if key == "batch" else "sequence length T (tokens)") + f", {fixed_label}")
    ax.set_ylabel("activation memory (GiB, modeled peak)")
    ax.grid(alpha=0.3, which="both")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.json) as f:
        r = json.load(f)
    if r.get("format") != "memopt.fit":
        raise SystemExit(f"{a.json}: not a memopt.fit file; regenerate with `memopt estimate --fit-chart`")
    m = r["model"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.8))
    panel(axes[0], r, r["by_batch"], "batch", r["largest_batch"], f"T = {m['seq_len']}")
    panel(axes[1], r, r["by_seq"], "seq", r["largest_seq"], f"B = {m['batch']}")
    axes[0].set_title("versus batch size", fontsize=10)
    axes[1].set_title("versus sequence length", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.08))
    fig.suptitle(f"Will GPT-2 {m.get('preset', '')} ({m['n_layer']} layers, C={m['n_embd']}, {r['dtype']}, "
                 f"{m.get('attention', 'explicit')} attention) fit on the {r['device']['name'].replace(' (modeled)', '')}?\n"
                 "MODELED, not measured: analytic activation bytes, roofline times for the overhead cap; "
                 "each strategy must stay under the dashed line", fontsize=10)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out, f"fit_chart.{ext}"), dpi=150, bbox_inches="tight")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""plot_tradeoff.py: the figures of a `memopt tradeoff` report, from its tradeoff.json.

    .venv/bin/python tools/plot_tradeoff.py DIR/tradeoff.json --out DIR

`memopt tradeoff` runs this itself when the venv exists. Writes, as PNG and SVG:
  overhead_vs_budget     time overhead vs activation budget, one colour per solver,
                         predicted lines, measured markers with their interquartile
                         range (when the report has them); a plan measured faster than
                         store-all beyond both spreads is marked (!) on the axis, never
                         left off scale
  stage_map              what the optimal plan does to each stage at each budget
  predicted_vs_measured  measured vs predicted peak and time (only with measured points)
Plotting only: every number comes from tradeoff.json.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

MIB = 2 ** 20
GIB = 2 ** 30
COLORS = {"optimal": "#d62728", "recompute-only": "#ff7f0e", "sqrt": "#2ca02c", "recompute-blocks": "#1f77b4",
          "recompute-all": "#9467bd", "store-all": "#7f7f7f", "offload-all": "#8c564b", "rotor-compat": "#e377c2",
          "selective": "#17becf", "pointwise": "#bcbd22"}
# Solvers often tie (optimal = recompute-only without a link; offload-all = recompute-blocks
# in time when copies hide): distinct dashes and widths keep tied curves visible.
STYLES = {"optimal": ("-", 4.0), "recompute-only": ("--", 1.8), "sqrt": ("-", 1.6), "recompute-blocks": ("-.", 1.8),
          "recompute-all": ("-", 1.6), "store-all": ("-", 1.6), "offload-all": (":", 2.4), "rotor-compat": ("--", 1.2)}
CATEGORIES = [("kept", "#4daf4a", "kept (stored once)"),
              ("checkpointed", "#377eb8", "checkpointed (input kept, recomputed)"),
              ("recomputed", "#ff7f00", "recomputed from an earlier checkpoint"),
              ("offloaded", "#984ea3", "input offloaded to the host"),
              ("saved-offloaded", "#f781bf", "saved state offloaded to the host (input and output stay)")]


def model_label(r):
    m = r["model"]
    name = f"{m.get('name', 'model')} {m.get('preset', '')}".strip()
    dims = f"L={m.get('n_layer')}, C={m.get('n_embd')}, B={m.get('batch')}, T={m.get('seq_len')}"
    return f"{name} ({dims}, {m.get('dtype', 'float32')})"


def size_unit(ref_bytes):
    return (GIB, "GiB") if ref_bytes >= 10 * GIB else (MIB, "MiB")


def provenance(r):
    dev = r["profile_device"].get("name", "?").replace(" (modeled)", "")
    if r["profile_measured"]:
        return f"profile MEASURED on {dev}"
    return f"profile MODELED for {dev} (roofline; not measured)"


def save(fig, out, name):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"{name}.{ext}"), dpi=150, bbox_inches="tight")
    plt.close(fig)


def overhead_plot(r, out):
    ref = r["store_all_peak_bytes"]
    base = r["base_time_ms"]
    mbase = r.get("measured_base", {}).get("time_ms")
    fig, ax = plt.subplots(figsize=(9, 5.5))
    any_measured = False
    measured_ys, flagged = [], []
    # A solver far above the rest (recompute-all on a deep model: +800%) would flatten
    # every other curve: the axis stops above the others and its legend gives the value.
    lowest = {}
    for solver in r["solvers"]:
        ys = [100 * (p["predicted"]["time_ms"] / base - 1) for p in r["points"]
              if p["solver"] == solver and p["status"] == "ok"]
        if ys:
            lowest[solver] = min(ys)
    ordered = sorted(lowest.values())
    cap = None
    if len(ordered) >= 2 and ordered[-1] > 3 * max(ordered[-2], 10):
        cap = 1.6 * max(ordered[-2], 10)
        # Measured points always stay on the axis, so the cap rises to hold them.
        if mbase:
            measured_all = [100 * (p["measured"]["time_q75_ms"] / mbase - 1) for p in r["points"]
                            if "measured" in p]
            cap = max([cap] + [y + 3 for y in measured_all])
    for solver in r["solvers"]:
        pts = [p for p in r["points"] if p["solver"] == solver and p["status"] == "ok"]
        if not pts:
            continue
        x = [100 * p["budget_bytes"] / ref for p in pts]
        y = [100 * (p["predicted"]["time_ms"] / base - 1) for p in pts]
        c = COLORS.get(solver, None)
        ls, lw = STYLES.get(solver, ("-", 1.6))
        label = solver if cap is None or lowest[solver] <= cap else f"{solver} (+{lowest[solver]:.0f}%, off scale)"
        ax.plot(x, y, ls, color=c, lw=lw, alpha=0.55 if solver == "optimal" else 1.0, marker=".", ms=5,
                label=label, zorder=2)
        mp = [p for p in pts if "measured" in p]
        if mp and mbase:
            any_measured = True
            mx = [100 * p["budget_bytes"] / ref for p in mp]
            my = [100 * (p["measured"]["time_ms"] / mbase - 1) for p in mp]
            lo = [y - 100 * (p["measured"]["time_q25_ms"] / mbase - 1) for p, y in zip(mp, my)]
            hi = [100 * (p["measured"]["time_q75_ms"] / mbase - 1) - y for p, y in zip(mp, my)]
            ax.errorbar(mx, my, yerr=[lo, hi], fmt="o", mfc="none", mec=c, ecolor=c, mew=1.5, elinewidth=1,
                        capsize=2, ms=10 if solver == "optimal" else 6, zorder=3)
            measured_ys += [y for y in my]
            for p, x, y in zip(mp, mx, my):
                if p["measured"].get("faster_than_store_all"):
                    flagged.append((x, y, solver))
    ax.axhline(0, color="black", lw=0.6)
    if cap is not None:
        ax.set_ylim(min([-5] + [y - 3 for y in measured_ys]), cap)
    for x, y, solver in flagged:
        ax.annotate("(!) faster than\nstore-all: testbed", (x, y), textcoords="offset points", xytext=(6, -14),
                    fontsize=7, color=COLORS.get(solver, "k"))
    unit, uname = size_unit(ref)
    ax.set_xlabel(f"activation budget (% of the store-all peak, {ref / unit:.1f} {uname})")
    ax.set_ylabel("time overhead over store-all (%)")
    title = f"Time vs memory: {model_label(r)}"
    sub = provenance(r) + "\nlines: PREDICTED by memopt's simulator"
    if any_measured:
        mb = r["measured_base"]
        on = r["machine"].get("run_device") or r["machine"].get("cpu", "?")
        sub += (f"; circles: MEASURED on {on}, median of {mb['steps']} interleaved "
                f"steps after {mb['warmup_steps']} warm-up, bars: IQR")
    ax.set_title(title + "\n" + sub, fontsize=9.5)
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.lines import Line2D
    handles += [Line2D([], [], color="k", lw=1.8), Line2D([], [], ls="none", marker="o", mfc="none", mec="k")]
    labels += ["predicted (line)", "measured (circle)"] if any_measured else ["predicted (line)", "(no measured runs)"]
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    secx = ax.secondary_xaxis("top", functions=(lambda p: p * ref / 100 / unit, lambda m: m * unit * 100 / ref))
    secx.set_xlabel(f"activation budget ({uname})")
    ax.grid(alpha=0.3)
    save(fig, out, "overhead_vs_budget")


def stage_map(r, out, solver="optimal"):
    ref = r["store_all_peak_bytes"]
    names = r["stage_names"]
    budgets = r["budgets_bytes"]
    idx = {c: i for i, (c, _, _) in enumerate(CATEGORIES)}
    grid = [[float("nan")] * len(budgets) for _ in names]
    labels = [[""] * len(budgets) for _ in names]
    infeasible = []
    for j, b in enumerate(budgets):
        p = next((p for p in r["points"] if p["solver"] == solver and p["budget_bytes"] == b), None)
        if p is None or p["status"] != "ok":
            infeasible.append(j)
            continue
        for i, s in enumerate(p["stages"]):
            grid[i][j] = idx[s["category"]]
            if s["num_recomputes"] > 0:
                labels[i][j] = f"{s['num_recomputes']}x"
    h = max(3.5, 0.28 * len(names) + 1.8)
    w = max(6.0, 0.55 * len(budgets) + 3.0)
    fig, ax = plt.subplots(figsize=(w, h))
    cmap = ListedColormap([c for _, c, _ in CATEGORIES])
    cmap.set_bad("#dddddd")
    ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(CATEGORIES) - 0.5, aspect="auto", interpolation="nearest")
    small = len(names) * len(budgets) <= 600
    for i in range(len(names)):
        for j in range(len(budgets)):
            if labels[i][j] and small:
                ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=6.5, color="white")
    for j in infeasible:
        ax.text(j, (len(names) - 1) / 2, "no plan fits", rotation=90, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(budgets)))
    ax.set_xticklabels([f"{100 * b / ref:.0f}%" for b in budgets], rotation=60, fontsize=7.5)
    step = max(1, len(names) // 40)
    ax.set_yticks(range(0, len(names), step))
    ax.set_yticklabels(names[::step], fontsize=7.5)
    unit, uname = size_unit(ref)
    ax.set_xlabel(f"activation budget (% of the store-all peak, {ref / unit:.1f} {uname})")
    ax.set_ylabel("stage (input side at the top)")
    ax.set_title(f"What the {solver} plan does to each stage: {model_label(r)}\n{provenance(r)}; plans are "
                 "PREDICTED (solver output); 'Nx' = recomputed N extra times", fontsize=9)
    legend = [Patch(color=c, label=l) for _, c, l in CATEGORIES] + [Patch(color="#dddddd", label="no plan fits")]
    ax.legend(handles=legend, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, out, "stage_map")


def predicted_vs_measured(r, out):
    pts = [p for p in r["points"] if "measured" in p and not p["measured"].get("same_ops_as")]
    if "measured_base" in r:  # store-all, measured once without a budget
        pts.append({"solver": "store-all", "measured": r["measured_base"],
                    "predicted": {"peak_bytes": r["store_all_peak_bytes"], "time_ms": r["base_time_ms"]}})
    if not pts:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, key, scale, unit in ((axes[0], "peak_bytes", MIB, "MiB"), (axes[1], "time_ms", 1.0, "ms")):
        seen = set()
        for p in pts:
            s = p["solver"]
            m = p["measured"]
            yerr = None
            if key == "time_ms":
                yerr = [[(m["time_ms"] - m["time_q25_ms"]) / scale], [(m["time_q75_ms"] - m["time_ms"]) / scale]]
            ax.errorbar(p["predicted"][key] / scale, m[key] / scale, yerr=yerr, fmt="o", color=COLORS.get(s), ms=6,
                        alpha=0.8, capsize=2, label=None if s in seen else s)
            seen.add(s)
        vals = [p["predicted"][key] / scale for p in pts] + [p["measured"][key] / scale for p in pts]
        lo, hi = min(vals) * 0.9, max(vals) * 1.1
        ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x (perfect prediction)")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        what = "activation peak" if key == "peak_bytes" else "step time"
        ax.set_xlabel(f"PREDICTED {what} ({unit}, simulator)")
        ax.set_ylabel(f"MEASURED {what} ({unit}, median; bars: IQR)")
        ax.set_title(f"{what}: measured vs predicted", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7.5)
    fig.suptitle(f"{model_label(r)}: one point per distinct schedule\n{provenance(r)}; measured on "
                 f"{r['machine'].get('cpu', '?')}, {r['machine'].get('cores', '?')} cores", fontsize=10)
    fig.tight_layout()
    save(fig, out, "predicted_vs_measured")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.json) as f:
        r = json.load(f)
    if r.get("format") != "memopt.tradeoff":
        raise SystemExit(f"{a.json}: not a memopt.tradeoff file; regenerate with `memopt tradeoff`")
    os.makedirs(a.out, exist_ok=True)
    overhead_plot(r, a.out)
    stage_map(r, a.out)
    predicted_vs_measured(r, a.out)


if __name__ == "__main__":
    main()

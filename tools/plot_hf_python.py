"""plot_hf_python.py: the figure and table of the Python benchmark (bench_hf_python.py):
per shape, each variant's median step time (bars: interquartile range) against its
measured activation peak (dotted: hf-ckpt's peak, memopt's budget), and a Markdown
table of the same numbers, with the benchmark's two questions answered beneath it.
  python3 tools/plot_hf_python.py --out DIR --case "TITLE" small.json --case "TITLE" c256.json
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 2**20


# memopt's kinds of variant (bench_hf_python.py): eager stages, compiled stages, a chunked
# head, both; each with its label and its markers at hf-ckpt's peak and at another budget.
KINDS = {"memopt": ("memopt", "o", "D"), "memopt-compiled": ("memopt, compiled stages", "o", "D"),
         "memopt-chunked": ("memopt, chunked loss", "p", "h"),
         "memopt-compiled-chunked": ("memopt, compiled stages and chunked loss", "*", "X")}
LINK_COLORS = ["tab:orange", "tab:green", "tab:purple", "tab:brown"]
COMPILE_COLORS = {True: "tab:gray", False: "tab:olive"}  # activation_memory_budget above 0.3, or not


def series(name, links):
    """(legend label, style): one colour per way of training (each offload link in
    `links` its own, in order); memopt's circles sit at hf-ckpt's peak as budget, its
    diamonds at the larger budget; memopt's compiled stages (memopt-compiled...) and its
    chunked head (memopt-chunked..., pentagons and hexagons) are hollow markers of the
    same colours, both at once hollow stars and crosses."""
    if name == "plain":
        return "plain HF", dict(marker="s", color="black")
    if name == "hf-ckpt":
        return "HF gradient checkpointing", dict(marker="^", color="tab:red", markersize=9)
    if name.startswith("compile@"):
        fraction = name.partition("@")[2]
        return f"torch.compile, activation_memory_budget {fraction}", \
            dict(marker="P", color=COMPILE_COLORS[float(fraction) > 0.3], markersize=9)
    link, _, budget = name.partition(" @")
    kind, _, over = link.partition("+")  # over: the link memopt offloads over; empty: none
    kind_label, at_hf_peak, at_budget = KINDS[kind]
    label = kind_label + (", recompute-only" if not over else f", offload over the {over} link"
                          if over == "measured" else f", offload over {over}")
    color = "tab:blue" if not over else LINK_COLORS[links.index(f"memopt+{over}") % len(LINK_COLORS)]
    style = dict(color=color, **(dict(markerfacecolor="none", markeredgewidth=1.5) if kind != "memopt" else {}))
    if not budget:
        return label + ", budget = hf-ckpt's peak", dict(marker=at_hf_peak, **style)
    # A budget word (80%) or a byte count: a torch.compile variant's measured peak
    # (bench_hf_python.py), which differs from panel to panel.
    shown = "= torch.compile's peak" if budget.isdigit() else f"{budget} of store-all"
    return label + f", budget {shown}", dict(marker=at_budget, **style)


def table(title, d):
    hf = d["variants"]["hf-ckpt"]["time_ms"]["median"]
    # A run cut short (bench_hf_python.py's Note [A record after every round]) says so.
    cut = "" if d.get("complete", True) else f"; cut short after {d['rounds']} measured rounds"
    rows = [f"**{title}** (hf-ckpt's measured peak: {d['hf_ckpt_peak_bytes'] / MIB:.1f} MiB{cut})", "",
            "| variant | budget | step time, median (IQR) | vs hf-ckpt | measured peak | predicted peak | recomputed / offloaded ops |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, v in d["variants"].items():
        t = v["time_ms"]
        plan = d["plans"].get(name)
        budget = f"{plan['budget_bytes'] / MIB:.1f} MiB" if plan else ""
        predicted = f"{plan['predicted']['peak_bytes'] / MIB:.1f} MiB" if plan else ""
        ops = f"{plan['num_recomputed']} / {plan['num_offloads']}" if plan else ""
        rows.append(f"| {name} | {budget} | {t['median']:.0f} ms ({t['q1']:.0f}-{t['q3']:.0f}) | "
                    f"{t['median'] / hf:.2f}x | {v['peak_bytes'] / MIB:.1f} MiB | {predicted} | {ops} |")
    # Variants planned but not measured: under memopt's floor, or failed (bench_hf_python.py's
    # Note [A variant that fails]).
    missing = [f"- {name}: {plan.get('failed') or 'infeasible: ' + plan['infeasible']}"
               for name, plan in d["plans"].items() if "failed" in plan or "infeasible" in plan]
    if missing:
        rows += ["", "Not measured:", *missing]
    return "\n".join(rows) + "\n"


def fastest_within(d, peak_bytes, names):
    """The fastest of `names` (median step) whose measured peak is at most `peak_bytes`, or None."""
    fits = [n for n in names if d["variants"][n]["peak_bytes"] <= peak_bytes]
    return min(fits, key=lambda n: d["variants"][n]["time_ms"]["median"], default=None)


def goals(d, ratio):
    """The benchmark's two questions, answered from the medians: at hf-ckpt's measured peak,
    is memopt's fastest step at most `ratio` of hf-ckpt's; and is any competitor both leaner
    and faster than memopt's curve -- the fastest memopt variant at or under its peak?"""
    v = d["variants"]
    ms = lambda n: v[n]["time_ms"]["median"]
    mine = [n for n in v if n.startswith("memopt")]
    hf = v["hf-ckpt"]
    rows = ["", "| question | answer |", "|---|---|"]
    best = fastest_within(d, hf["peak_bytes"], mine)
    if best is None:
        rows.append(f"| at hf-ckpt's peak, memopt's step at most {ratio:g}x hf-ckpt's | **no**: no memopt variant "
                    f"peaked at or under {hf['peak_bytes'] / MIB:.1f} MiB |")
    else:
        r = ms(best) / hf["time_ms"]["median"]
        rows.append(f"| at hf-ckpt's peak, memopt's step at most {ratio:g}x hf-ckpt's | "
                    f"**{'yes' if r <= ratio else 'no'}**: {r:.2f}x, {best} ({ms(best):.0f} ms, "
                    f"{v[best]['peak_bytes'] / MIB:.1f} MiB) |")
    for name in (n for n in v if not n.startswith("memopt")):
        best = fastest_within(d, v[name]["peak_bytes"], mine)
        if best is None:
            answer = "**yes**: it peaks under every memopt variant"
        elif ms(best) <= ms(name):
            answer = f"no: {best} is leaner and {'as fast' if ms(best) == ms(name) else 'faster'} " \
                     f"({ms(best):.0f} ms, {v[best]['peak_bytes'] / MIB:.1f} MiB)"
        else:
            answer = f"**yes**: memopt's fastest at or under its peak is {best} " \
                     f"({ms(best):.0f} ms, {v[best]['peak_bytes'] / MIB:.1f} MiB)"
        rows.append(f"| {name} ({ms(name):.0f} ms, {v[name]['peak_bytes'] / MIB:.1f} MiB) below memopt's curve "
                    f"| {answer} |")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the folder for steps.png and table.md, made if missing")
    ap.add_argument("--case", nargs=2, action="append", metavar=("TITLE", "JSON"), required=True)
    ap.add_argument("--goal", type=float, default=0.8, help="the dashed line: this fraction of hf-ckpt's step time")
    ap.add_argument("--ratio", type=float, default=0.85,
                    help="the table's question: memopt's step at hf-ckpt's peak at most this fraction of hf-ckpt's")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fig, axes = plt.subplots(1, len(args.case), figsize=(6.5 * len(args.case), 5.6), squeeze=False)
    md = []
    for ax, (title, path) in zip(axes[0], args.case):
        with open(path) as f:
            d = json.load(f)
        if not d["variants"]:
            raise SystemExit(f"plot_hf_python: {path} has no measured round: its run was cut short before one")
        md.append(table(title, d) + goals(d, args.ratio))
        links = list(dict.fromkeys(n.partition(" @")[0] for n in d["variants"] if n.startswith("memopt+")))
        for name, v in d["variants"].items():
            t = v["time_ms"]
            label, style = series(name, links)
            ax.errorbar([v["peak_bytes"] / MIB], [t["median"]], yerr=[[t["median"] - t["q1"]], [t["q3"] - t["median"]]],
                        linestyle="none", capsize=3, label=label, **style)
        ax.axvline(d["hf_ckpt_peak_bytes"] / MIB, color="tab:red", linestyle=":", linewidth=1)
        ax.axhline(args.goal * d["variants"]["hf-ckpt"]["time_ms"]["median"], color="gray", linestyle="--",
                   linewidth=1, label=f"{args.goal:g}x HF checkpointing's time")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("measured activation peak (MiB)")
        ax.set_ylabel("step time, median (ms)")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout()
    # Below the panels, however many entries: the saved figure's tight box takes it in.
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=3 if len(args.case) > 1 else 2, fontsize=8, frameon=False)
    fig.savefig(os.path.join(args.out, "steps.png"), dpi=120, bbox_inches="tight")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""plot_loss_report.py: the figures and README of tools/make_loss_report.sh, from the
profiles, trade-off reports and head benchmark it wrote into DIR.

    .venv/bin/python tools/plot_loss_report.py DIR DATE "LOAD AVERAGE"

Writes, as PNG and SVG:
  tradeoff_before_after  predicted step time vs activation budget of the optimal plan
                         with ATen's loss and with the chunked one, each loss's smallest
                         feasible budget marked; GPT-2 small measured here and GPT-2 xl
                         modeled, at T=256 and T=1024
  head_time              the head stage's forward + backward time with each loss
                         (median of the interleaved repetitions, bars = IQR)
and README.md with the tables. Plotting and tables only: every number comes from the
files memopt wrote.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmark_json import quartiles, repetitions, time_ns  # noqa: E402

MIB = 2 ** 20
LOSSES = [("aten", "ATen loss (N x V logits)", "#1f77b4"), ("chunked", "chunked loss", "#d62728")]
PANELS = [("small-t256", "GPT-2 small, B=1, T=256 (measured here)"),
          ("small-t1024", "GPT-2 small, B=1, T=1024 (measured here)"),
          ("xl-t256", "GPT-2 xl, B=1, T=256 (modeled, H100 bf16)"),
          ("xl-t1024", "GPT-2 xl, B=1, T=1024 (modeled, H100 bf16)")]


def load(path):
    with open(path) as f:
        return json.load(f)


def curve(report, solver):
    pts = [p for p in report["points"] if p["solver"] == solver and p["status"] == "ok"]
    pts.sort(key=lambda p: p["budget_bytes"])
    return [p["budget_bytes"] / MIB for p in pts], [p["predicted"]["time_ms"] for p in pts]


def ms(v):
    return f"{v:.0f}" if v >= 10 else f"{v:.3g}"


def head_stage(profile):
    return next(s for s in profile["stages"] if s["name"] == "head")


def main():
    d, date, machine_load = sys.argv[1:4]
    reports = {(p, l): load(f"{d}/{p}-{l}/tradeoff.json") for p, _ in PANELS for l, _, _ in LOSSES}
    profiles = {(p, l): load(f"{d}/{p}-{l}.profile.json") for p, _ in PANELS for l, _, _ in LOSSES}

    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    for ax, (prefix, title) in zip(axes.flat, PANELS):
        aten_store_all = reports[(prefix, "aten")]["store_all_peak_bytes"] / MIB
        for loss, label, color in LOSSES:
            r = reports[(prefix, loss)]
            x, y = curve(r, "optimal")
            floor = r["min_budget_bytes"]["optimal"] / MIB
            ax.plot(x, y, "-o", color=color, ms=3,
                    label=f"{label}: optimal plan; smallest budget {floor:.0f} MiB "
                          f"({100 * floor / aten_store_all:.1f}% of ATen store-all), dashed")
            ax.axvline(floor, color=color, ls="--", lw=1)
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.3 * (hi - lo))  # room for the legend above the curves
        ax.legend(fontsize=7, loc="upper right")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("activation budget (MiB)")
        ax.set_ylabel("predicted step time (ms)")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    fig.suptitle("Smallest budget and trade-off curve, before (ATen loss) and after (chunked loss)", fontsize=12)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{d}/tradeoff_before_after.{ext}", dpi=130)
    plt.close(fig)

    bench, reps = repetitions(f"{d}/head_loss_bench.json")
    heads = {}  # (loss, T) -> (q25, median, q75, n)
    for name, runs in reps.items():
        times = [time_ns(b) / 1e6 for b in runs]  # ms
        _, loss_arg, seq = name.split("/")
        loss = "aten" if loss_arg == "0" else "chunked"
        heads[(loss, int(seq))] = (*quartiles(times), len(times))
    seqs = sorted({t for _, t in heads})
    fig, ax = plt.subplots(figsize=(6.5, 4))
    width = 0.38
    for k, (loss, label, color) in enumerate(LOSSES):
        xs = [i + (k - 0.5) * width for i in range(len(seqs))]
        med = [heads[(loss, t)][1] for t in seqs]
        err = [[heads[(loss, t)][1] - heads[(loss, t)][0] for t in seqs],
               [heads[(loss, t)][2] - heads[(loss, t)][1] for t in seqs]]
        ax.bar(xs, med, width, yerr=err, capsize=4, color=color, label=label)
        for x, m in zip(xs, med):
            ax.annotate(f"{m:.0f}", (x, m), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    ax.set_xticks(range(len(seqs)))
    ax.set_xticklabels([f"T={t}" for t in seqs])
    ax.set_ylabel("head stage fwd + bwd (ms), median, bars = IQR")
    ax.set_title("GPT-2 small's head (C=768, V=50,257, B=1), one thread, measured", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{d}/head_time.{ext}", dpi=130)
    plt.close(fig)

    with open(f"{d}/commands.txt") as f:
        commands = [c.strip() for c in f if c.strip()]
    o = ["# The LM head's memory floor: ATen's loss against the chunked one", "",
         "GPT-2's head with `--loss aten` (linear + log_softmax + nll_loss: the N x V logits, their "
         "log-probabilities and gradients, and dense V x C gradients of the tied wte from the head and the "
         "embedding) and with `--loss chunked` (the chunked linear cross-entropy of model/kernel_ops.h, which "
         "holds one block of logits, and both of wte's gradients added into wte.grad in place).", "",
         "- GPT-2 small rows are **MEASURED** on this CPU: bytes by the counting allocator (equal to the analytic "
         "twin's), stage times inside warm training steps; the curves are the solver's predictions from those "
         "profiles (its predictions of this testbed hold within a few percent: see the other reports).",
         "- GPT-2 xl rows are **MODELED** (`memopt estimate`, H100-80GB, bf16): bytes from the analytic twin, "
         "times from a roofline.",
         "- The head times are **MEASURED**: `head_loss_bench`, both losses in one process, 9 repetitions "
         "interleaved at random, one thread.", "",
         "![trade-off before and after](tradeoff_before_after.png)", "",
         "| model | ATen store-all | chunked store-all | ATen smallest budget | chunked smallest budget |",
         "|---|---:|---:|---:|---:|"]
    for prefix, title in PANELS:
        a, c = reports[(prefix, "aten")], reports[(prefix, "chunked")]
        base = a["store_all_peak_bytes"]

        def mib(b):
            return f"{b / MIB:.1f} MiB"
        o.append(f"| {title} | {mib(base)} | {mib(c['store_all_peak_bytes'])} "
                 f"({100 * c['store_all_peak_bytes'] / base:.0f}%) | {mib(a['min_budget_bytes']['optimal'])} "
                 f"({100 * a['min_budget_bytes']['optimal'] / base:.1f}%) | {mib(c['min_budget_bytes']['optimal'])} "
                 f"({100 * c['min_budget_bytes']['optimal'] / base:.1f}%) |")
    o += ["", "Percentages are of ATen's store-all peak (the activation peak with nothing recomputed or offloaded; "
          "weights, gradients and optimizer state are static and not in the budget).", "",
          "## The head stage", "", "Bytes from the profiles (`head` row):", "",
          "| model | loss | saved | fwd transient | bwd transient | fwd ms | bwd ms |", "|---|---|---:|---:|---:|---:|---:|"]
    for prefix, title in PANELS:
        for loss, _, _ in LOSSES:
            h = head_stage(profiles[(prefix, loss)])
            o.append(f"| {title} | {loss} | {h['saved_bytes'] / MIB:.2f} MiB | {h['fwd_tmp_bytes'] / MIB:.2f} MiB | "
                     f"{h['bwd_tmp_bytes'] / MIB:.2f} MiB | {ms(h['fwd_ms'])} | {ms(h['bwd_ms'])} |")
    o += ["", "![head time](head_time.png)", "",
          "| T | ATen ms (IQR) | chunked ms (IQR) | chunked / ATen | repetitions |", "|---:|---:|---:|---:|---:|"]
    for t in seqs:
        a, c = heads[("aten", t)], heads[("chunked", t)]
        o.append(f"| {t} | {a[1]:.0f} ({a[0]:.0f} - {a[2]:.0f}) | {c[1]:.0f} ({c[0]:.0f} - {c[2]:.0f}) | "
                 f"{c[1] / a[1]:.3f} | {a[3]} |")
    o += ["", f"Machine: {bench['context'].get('num_cpus')} CPUs; load average before the benchmark {machine_load}.",
          "", "## Reproduce", "", "```sh", "tools/make_loss_report.sh", "```", "",
          "which runs, in this order:", "", "```sh"] + commands + ["```", ""]
    with open(f"{d}/README.md", "w") as f:
        f.write("\n".join(o))


if __name__ == "__main__":
    main()

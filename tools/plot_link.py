#!/usr/bin/env python3
"""plot_link.py: the copy engine's achieved rate against the requested one, from
copy_link_bench's JSON (tests/bench/copy_link_bench.cpp).

    .venv/bin/python tools/plot_link.py copy_link_bench.json --out DIR

Writes DIR/link_rates.png and .svg. Plotting only: every number comes from the JSON.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.json) as f:
        runs = [b for b in json.load(f)["benchmarks"] if b["name"].startswith("BM_CappedLink")]
    capped = [b for b in runs if b["requested_bytes_per_s"] > 0]
    uncapped = [b for b in runs if b["requested_bytes_per_s"] == 0]
    fig, ax = plt.subplots(figsize=(6.5, 5))
    req = [b["requested_bytes_per_s"] for b in capped]
    ax.loglog(req, [b["d2h_bytes_per_s"] for b in capped], "o", label="device to host (offload)")
    ax.loglog(req, [b["h2d_bytes_per_s"] for b in capped], "s", mfc="none", label="host to device (prefetch)")
    lo, hi = min(req) / 2, max(req) * 20
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="achieved = requested")
    for b in uncapped:
        ax.axhline(b["d2h_bytes_per_s"], color="C0", lw=0.8, ls=":", label="uncapped memcpy, d2h")
        ax.axhline(b["h2d_bytes_per_s"], color="C1", lw=0.8, ls=":", label="uncapped memcpy, h2d")
    ax.set_xlabel("requested link rate (bytes/s)")
    ax.set_ylabel("achieved rate (bytes/s, median of 5 x 3 transfers)")
    ax.set_title("CPU copy engine: an emulated link binds at every rate\n"
                 "MEASURED on this machine; each transfer lasts ~20 ms at the requested rate", fontsize=9.5)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    os.makedirs(a.out, exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(a.out, f"link_rates.{ext}"), dpi=150, bbox_inches="tight")


if __name__ == "__main__":
    main()

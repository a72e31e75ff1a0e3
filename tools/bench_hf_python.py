"""bench_hf_python.py: a Hugging Face GPT-2 trained four ways in one process, one
compute thread, steps interleaved (A B C D A B C D ...) after warm-up rounds:
  plain     HF training, everything stored;
  hf-ckpt   HF's gradient_checkpointing_enable() (every block recomputed);
  memopt    memopt.optimize, recompute-only, budget = hf-ckpt's measured peak;
  memopt+offload  the same budget, offloading over an emulated GPU link.
The model is HF's GPT2LMHeadModel as it is (eager attention, dropout 0.1), random
weights. A step is `model(input_ids=ids, labels=ids).loss.backward()` plus zeroing the
gradients; its activation peak is what the testbed allocator held above the bytes that
existed before it. Writes one JSON per shape.

  .venv/bin/python tools/bench_hf_python.py --layers 12 --embd 768 --heads 12 --batch 1 --seq 256 \
      --link h100-sxm:pcie5 --out results/DIR/small.json
"""
import argparse
import copy
import json
import statistics
import sys
import time

import torch
import transformers

import memopt
from benchmark_json import quartiles  # the report scripts' one quartile rule (tools/)
from memopt import testbed


def summary(values):
    q1, median, q3 = quartiles(values)
    return {"median": median, "q1": q1, "q3": q3, "values": values}


def model_for(args):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads,
                                     n_positions=max(1024, args.seq), resid_pdrop=0.1, embd_pdrop=0.1,
                                     attn_pdrop=0.1)
    config._attn_implementation = "eager"
    return transformers.GPT2LMHeadModel(config).train()


def step(model, ids):
    model.zero_grad(set_to_none=False)
    base = testbed.current_bytes()
    testbed.reset_peak()
    t0 = time.perf_counter()
    model(input_ids=ids, labels=ids).loss.backward()
    ms = (time.perf_counter() - t0) * 1e3
    return ms, testbed.peak_bytes() - base


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--embd", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--link", default="h100-sxm:pcie5", help="emulated GPU link of memopt+offload")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    log = lambda *a: print("[bench]", *a, file=sys.stderr, flush=True)

    ids = torch.randint(0, 50257, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    base_model = model_for(args)
    plain = base_model
    hf = copy.deepcopy(base_model)
    (getattr(hf, "activation_checkpointing_enable", None) or hf.gradient_checkpointing_enable)()
    for _ in range(2):
        _, hf_peak = step(hf, ids)
    budget = hf_peak
    log(f"hf-ckpt peak {hf_peak} B; memopt budget {budget} B")
    variants = {"plain": plain, "hf-ckpt": hf}
    plans = {}
    for name, link in (("memopt", None), ("memopt+offload", args.link)):
        m = copy.deepcopy(base_model)
        log(f"optimizing {name}")
        memopt.optimize(m, ids, budget=str(budget), link=link, progress=True)
        variants[name] = m
        plans[name] = {"predicted": m.memopt_plan.predicted, "solver": m.memopt_plan.schedule["solver"],
                       "ops": [op[0] for op in m.memopt_plan.schedule["ops"]]}
    times = {k: [] for k in variants}
    peaks = {k: [] for k in variants}
    for r in range(args.warmup + args.steps):
        for name, m in variants.items():
            ms, peak = step(m, ids)
            log(f"round {r + 1} {name}: {ms:.0f} ms, peak {peak / 2**20:.1f} MiB")
            if r >= args.warmup:
                times[name].append(ms)
                peaks[name].append(peak)
    out = {
        "model": {"n_layer": args.layers, "n_embd": args.embd, "n_head": args.heads, "batch": args.batch,
                  "seq_len": args.seq, "attention": "eager", "dropout": 0.1},
        "link": args.link, "threads": 1, "warmup_rounds": args.warmup, "rounds": args.steps,
        "hf_ckpt_peak_bytes": hf_peak, "memopt_budget_bytes": budget,
        "variants": {k: {"time_ms": summary(times[k]), "peak_bytes": statistics.median(peaks[k]),
                         "max_peak_bytes": max(peaks[k])} for k in variants},
        "plans": plans,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    for k, v in out["variants"].items():
        log(f"{k}: {v['time_ms']['median']:.0f} ms (IQR {v['time_ms']['q1']:.0f}-{v['time_ms']['q3']:.0f}), "
            f"peak {v['peak_bytes'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()

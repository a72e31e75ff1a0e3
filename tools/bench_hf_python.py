"""bench_hf_python.py: a Hugging Face GPT-2 or Llama trained several ways in one process,
steps interleaved (A B C D A B C D ...) after warm-up rounds:
  plain     HF training, everything stored;
  hf-ckpt   HF's gradient_checkpointing_enable() (every block recomputed);
  compile@F torch.compile with torch._functorch.config.activation_memory_budget = F
            (--compile-budgets; its budget is a fraction of saved bytes, not bytes);
  memopt    memopt.optimize, recompute-only, budget = hf-ckpt's measured peak;
  memopt+LINK  the same budget, offloading allowed over LINK;
and memopt again at each compile variant's measured peak and at --budgets, so that
every competitor has a memopt point at its own memory. With --memopt-compiled, every
memopt variant runs again with each stage compiled (memopt.optimize(compile_stages=True):
`memopt-compiled`, `memopt-compiled+LINK`), which tells whether compiling memopt's stages
closes the gap to torch.compile at equal memory; with --memopt-chunked-loss, again with
the head's loss computed by chunks (chunked_loss=True: `memopt-chunked`, ...), whose
lower floor leaves memopt room to keep blocks at HF checkpointing's peak; with both,
also with both at once (`memopt-compiled-chunked`, ...).
The model is HF's GPT2LMHeadModel (dropout 0.1) or LlamaForCausalLM (--arch llama:
grouped-query attention with --kv-heads, SwiGLU MLP of 2.6875 C, no dropout, as Llama
trains) as it is, random weights. With --new-shapes, memopt's plan for each other batch
shape is then made from the shape law (Note [How a profile scales with the batch
shape]) several times, timed, and one step of each shape is measured. A timed step
is `model(input_ids=ids, labels=ids).loss.backward()` (the gradients are zeroed in place
before it, untimed); its activation peak is what the device's allocator held above the
bytes that existed before it (memopt.testbed: the testbed allocator on the CPU, the
caching allocator's requested bytes on a GPU). On the CPU: one compute thread, the host
clock, emulated links; on a GPU (--device cuda): CUDA events, the GPU's own link
("measured"). Writes one JSON per shape, again after every measured round; a variant
that fails is recorded there with its error, and the others are measured. Its log lines
and its record's "seconds" and "graphs" say where the run's time went (Note [Where a run's
time went]).

  .venv/bin/python tools/bench_hf_python.py --layers 12 --embd 768 --heads 12 --batch 1 --seq 256 \
      --out results/DIR/small.json
  .venv/bin/python tools/bench_hf_python.py --arch llama --layers 8 --embd 512 --heads 8 --kv-heads 2 \
      --batch 1 --seq 512 --links 0.08GB/s,0.55GB/s --new-shapes 1x384,1x200 --out results/DIR/llama.json
  python3 tools/bench_hf_python.py --device cuda --attention sdpa --layers 12 --embd 768 --heads 12 \
      --batch 8 --seq 1024 --links measured --compile-budgets 0.5,0.2 --out gpu/small.json
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time
import traceback

import torch
import transformers
from torch._dynamo.utils import counters as dynamo_counters

import memopt
from benchmark_json import quartiles  # the report scripts' one quartile rule (tools/)
from memopt import testbed


def summary(values):
    q1, median, q3 = quartiles(values)
    return {"median": median, "q1": q1, "q3": q3, "values": values}


def model_for(args):
    torch.manual_seed(0)
    if args.arch == "llama":
        config = transformers.LlamaConfig(
            vocab_size=args.vocab or 32000, hidden_size=args.embd, intermediate_size=int(2.6875 * args.embd),
            num_hidden_layers=args.layers, num_attention_heads=args.heads,
            num_key_value_heads=args.kv_heads or args.heads, max_position_embeddings=max(1024, args.seq))
        config._attn_implementation = args.attention
        return transformers.LlamaForCausalLM(config).to(args.device).train()
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads,
                                     vocab_size=args.vocab or 50257, n_positions=max(1024, args.seq),
                                     resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
    config._attn_implementation = args.attention
    return transformers.GPT2LMHeadModel(config).to(args.device).train()


def first_norm(model):
    """The first block's first norm, which runs twice in a step that recomputes that block."""
    if isinstance(model, transformers.LlamaForCausalLM):
        return model.model.layers[0].input_layernorm
    return model.transformer.h[0].ln_1


class Clock:
    """The host clock on the CPU; CUDA events on a GPU (the device's time, not launches)."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"

    def start(self):
        if self.cuda:
            self.begin, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.begin.record()
        else:
            self.t0 = time.perf_counter()

    def stop_ms(self):
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            return self.begin.elapsed_time(self.end)
        return (time.perf_counter() - self.t0) * 1e3


def step(model, ids, clock):
    model.zero_grad(set_to_none=False)
    device = ids.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    base = testbed.current_bytes(device)
    testbed.reset_peak(device)
    clock.start()
    model(input_ids=ids, labels=ids).loss.backward()
    ms = clock.stop_ms()
    return ms, testbed.peak_bytes(device) - base


def compiled(plain, fraction):
    """torch.compile of a copy of the model, its activation memory budget `fraction`
    (read when the graph is compiled: at the first step, inside this patch)."""
    import torch._functorch.config as functorch_config
    model = copy.deepcopy(plain)
    compiled_forward = torch.compile(model.forward)

    def forward(*a, **k):
        with functorch_config.patch(activation_memory_budget=fraction):
            return compiled_forward(*a, **k)
    model.forward = forward
    return model


def new_shapes(plain, ids, budget, args, clock, log):
    """memopt at `budget` with the shape law: for each other shape, how long its plan
    takes to make (from the law; the cache cleared between repeats) and one step's
    measured peak against the budget."""
    m = copy.deepcopy(plain)
    t0 = time.perf_counter()
    memopt.optimize(m, ids, budget=budget, progress=True)
    out = {"optimize_s": time.perf_counter() - t0, "law": m.memopt_plans.law is not None,
           "why_no_law": m.memopt_plans.why_no_law, "shapes": {}}
    plans = m.forward.plans
    for word in args.new_shapes.split(","):
        b, t = (int(x) for x in word.split("x"))
        x = ids.repeat(-(-b // ids.shape[0]), 1)[:b, :t].clone()
        made_ms = []
        for _ in range(5):
            plans.by_shape.pop((b, t), None)
            start = time.perf_counter()
            plans.get(x, x)
            made_ms.append((time.perf_counter() - start) * 1e3)
        step(m, x, clock)  # warm-up at this shape
        ms, peak = step(m, x, clock)
        plan = m.memopt_plans[(b, t)]
        out["shapes"][word] = {"plan_ms": summary(made_ms), "step_ms": ms, "peak_bytes": peak,
                               "predicted_peak_bytes": plan.predicted["peak_bytes"],
                               "budget_bytes": plan.budget_bytes, "predicted_ms": plan.predicted["time_ms"]}
        log(f"shape {word}: plan in {statistics.median(made_ms):.1f} ms, step {ms:.0f} ms, peak "
            f"{peak / 2**20:.1f} MiB (budget {plan.budget_bytes / 2**20:.1f} MiB)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--embd", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (0: as many as --heads)")
    ap.add_argument("--vocab", type=int, default=0, help="vocabulary (0: GPT-2's 50257, Llama's 32000)")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--device", default="cpu", help="cpu (the testbed) or cuda")
    ap.add_argument("--attention", default="eager", help="HF's attention: eager or sdpa")
    ap.add_argument("--links", default="h100-sxm:pcie5,gh200:nvlink-c2c",
                    help="links memopt may offload over, comma-separated: emulated GPU links or bandwidths on the "
                         "CPU, `measured` (the GPU's own) on a GPU")
    ap.add_argument("--compile-budgets", default="",
                    help="torch.compile variants, one per activation_memory_budget fraction, comma-separated")
    ap.add_argument("--memopt-compiled", action="store_true",
                    help="also every memopt variant with its stages compiled (compile_stages=True)")
    ap.add_argument("--memopt-chunked-loss", action="store_true",
                    help="also every memopt variant with the head's loss by chunks (chunked_loss=True)")
    ap.add_argument("--budgets", default="80%",
                    help="budgets besides hf-ckpt's peak, comma-separated (memopt's budget words)")
    ap.add_argument("--new-shapes", default="",
                    help="other batch shapes BxT, comma-separated: memopt's plan for each, from the shape law")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    # Note [Where a run's time went]: where GPU time is scarce, the next run is planned
    # from this one: every log line carries the seconds since the start, and the
    # record's "seconds" holds each phase's -- the competitors (the first steps of
    # torch.compile's variants compile), each kind's profile and plans (compiled stages
    # compile in the profile), the warm-up and the measured rounds. Its "graphs" holds
    # how many graphs Dynamo made in each phase: a compiled kind's plans and rounds make
    # none, running the graphs its profile traced (Note [One code object per stage of a
    # model] in python/memopt/_compile.py); a number there says they were traced again.
    began = time.perf_counter()
    log = lambda *a: print(f"[bench {time.perf_counter() - began:6.1f} s]", *a, file=sys.stderr, flush=True)
    seconds, graphs = {}, {}
    graphs_so_far = [dynamo_counters["stats"]["unique_graphs"]]

    def phase(name, since, ended=True):
        """Records what ran since `since` as phase `name`; a phase not yet `ended` (the
        measured rounds, recorded after each) keeps its start."""
        seconds[name] = round(time.perf_counter() - since, 1)
        graphs[name] = dynamo_counters["stats"]["unique_graphs"] - graphs_so_far[0]
        if not ended:
            return since
        graphs_so_far[0] += graphs[name]
        return time.perf_counter()
    clock = Clock(args.device)

    plain = model_for(args)
    vocab = plain.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1)).to(args.device)
    hf = copy.deepcopy(plain)
    (getattr(hf, "activation_checkpointing_enable", None) or hf.gradient_checkpointing_enable)()
    for _ in range(2):
        _, hf_peak = step(hf, ids, clock)
    log(f"hf-ckpt peak {hf_peak} B")
    competitors = {"plain": plain, "hf-ckpt": hf}
    budgets = [str(hf_peak)]
    for fraction in [float(f) for f in args.compile_budgets.split(",") if f]:
        name = f"compile@{fraction:g}"
        competitors[name] = compiled(plain, fraction)
        for _ in range(2):  # the first compiles
            _, peak = step(competitors[name], ids, clock)
        log(f"{name} peak {peak} B")
        budgets.append(str(peak))
    since = phase("competitors", began)
    # Two competitors at one peak are one budget: one memopt point for both.
    budgets = list(dict.fromkeys(budgets + [b for b in args.budgets.split(",") if b]))
    # A guard on the comparison: HF's checkpointing must recompute in every step (its
    # first block's first norm runs twice), whatever ran in the process before.
    ln_1_calls = [0]
    first_norm(hf).register_forward_hook(lambda *a: ln_1_calls.__setitem__(0, ln_1_calls[0] + 1))
    # Every memopt plan of one kind (eager stages, compiled stages) runs on one copy of
    # the model: optimize() returns the plan's forward on it, and each step puts the
    # forward of its variant in place.
    variants, forwards, plans = dict(competitors), {}, {}
    store_all_peak = None  # eager stages'
    kinds = [("memopt", {})]
    if args.memopt_compiled:
        kinds.append(("memopt-compiled", {"compile_stages": True}))
    if args.memopt_chunked_loss:
        kinds.append(("memopt-chunked", {"chunked_loss": True}))
    if args.memopt_compiled and args.memopt_chunked_loss:
        kinds.append(("memopt-compiled-chunked", {"compile_stages": True, "chunked_loss": True}))
    for prefix, options in kinds:
        m = copy.deepcopy(plain)
        # One profile per kind, made before its plans: each budget and link reuses it.
        log(f"profiling {prefix}")
        try:
            profile, unprofiled = memopt.profile(m, ids, progress=True, **options), None
        except Exception as e:  # Note [A variant that fails]
            log(f"{prefix}'s profile failed:\n{traceback.format_exc()}")
            profile, unprofiled = None, f"{type(e).__name__}: {e}"
        since = phase(f"profile {prefix}", since)
        for budget in budgets:
            # At 100% every plan stores everything: no link variant to measure.
            for link in [None] + ([] if budget == "100%" else args.links.split(",")):
                name = (prefix if link is None else f"{prefix}+{link}") + ("" if budget == str(hf_peak) else f" @{budget}")
                # What a variant that is not measured leaves in the record, with why.
                unmeasured = {"budget_bytes": int(budget) if budget.isdigit() else budget, "link": link, **options}
                if unprofiled:
                    plans[name] = dict(unmeasured, failed=f"not tried: {prefix}'s profile failed: {unprofiled}")
                    continue
                log(f"optimizing {name}")
                try:
                    memopt.optimize(m, ids, budget=budget, link=link, progress=True, profile=profile,
                                    other_shapes=False, **options)
                except memopt.InfeasibleBudget as e:  # a competitor below memopt's floor: say so, go on
                    log(f"{name}: {e}")
                    plans[name] = dict(unmeasured, infeasible=str(e))
                    continue
                except Exception as e:  # Note [A variant that fails]
                    log(f"{name} failed:\n{traceback.format_exc()}")
                    plans[name] = dict(unmeasured, failed=f"{type(e).__name__}: {e}")
                    continue
                variants[name], forwards[name] = m, m.forward
                plan = m.memopt_plan
                if not options:
                    store_all_peak = plan.predicted["store_all_peak_bytes"]
                ops = [op[0] for op in plan.schedule["ops"]]
                plans[name] = {"budget_bytes": plan.budget_bytes, "predicted": plan.predicted, "link": link,
                               **options, "num_offloads": sum(o.startswith("offload") for o in ops),
                               "num_recomputed": ops.count("fwd_ckpt") + ops.count("fwd_drop")}
        since = phase(f"plans {prefix}", since)
    times = {k: [] for k in variants}
    peaks = {k: [] for k in variants}
    rounds_done = 0

    def record(done):
        """The JSON of the rounds measured so far (Note [A record after every round])."""
        measured = [k for k in variants if times[k]]
        return {
            "model": {"arch": args.arch, "n_layer": args.layers, "n_embd": args.embd, "n_head": args.heads,
                      "n_kv_head": args.kv_heads or args.heads, "vocab": vocab, "batch": args.batch,
                      "seq_len": args.seq, "attention": args.attention,
                      "dropout": 0.0 if args.arch == "llama" else 0.1},
            "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
            "threads": torch.get_num_threads(), "warmup_rounds": args.warmup, "rounds": rounds_done,
            "complete": done, "seconds": dict(seconds), "graphs": dict(graphs),
            "hf_ckpt_peak_bytes": hf_peak,
            "store_all_peak_bytes": store_all_peak,
            "variants": {k: {"time_ms": summary(times[k]), "peak_bytes": statistics.median(peaks[k]),
                             "max_peak_bytes": max(peaks[k])} for k in measured},
            "plans": plans,
            "new_shapes": new_shapes(plain, ids, str(hf_peak), args, clock, log) if done and args.new_shapes else {},
        }

    # Note [A record after every round]: a run cut short by its caller's time limit
    # (scripts/gpu_check.sh's deadline) still leaves the rounds it measured, each
    # variant with as many steps as the others, marked "complete": false; the file is
    # replaced whole, never left half written.
    def write(out):
        with open(args.out + ".part", "w") as f:
            json.dump(out, f, indent=2)
        os.replace(args.out + ".part", args.out)

    write(record(False))  # the plans, before any round
    # Note [A variant that fails]: a variant whose optimize() or step raises -- a first
    # run on a new device, an option combination that breaks there -- is recorded with
    # its error and left out of the rounds, and the others are measured as planned. A
    # kind whose profile fails has none of its variants tried: each needs that profile.
    for r in range(args.warmup + args.steps):
        for name, model in list(variants.items()):
            if name in forwards:
                model.forward = forwards[name]
            ln_1_calls[0] = 0
            try:
                ms, peak = step(model, ids, clock)
            except Exception as e:
                log(f"round {r + 1} {name} failed:\n{traceback.format_exc()}")
                plans.setdefault(name, {})["failed"] = f"round {r + 1}: {type(e).__name__}: {e}"
                del variants[name], times[name], peaks[name]
                if ids.device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            if name == "hf-ckpt" and ln_1_calls[0] != 2:
                raise SystemExit(f"hf-ckpt did not recompute in round {r + 1} (its first norm ran {ln_1_calls[0]} "
                                 f"times)")
            log(f"round {r + 1} {name}: {ms:.0f} ms, peak {peak / 2**20:.1f} MiB")
            if r >= args.warmup:
                times[name].append(ms)
                peaks[name].append(peak)
        if r + 1 == args.warmup:
            since = phase("warm-up rounds", since)
        if r >= args.warmup:
            rounds_done += 1
            phase("measured rounds", since, ended=False)
        if args.warmup <= r < args.warmup + args.steps - 1:
            write(record(False))
    out = record(True)
    write(out)
    for k, v in out["variants"].items():
        log(f"{k}: {v['time_ms']['median']:.0f} ms (IQR {v['time_ms']['q1']:.0f}-{v['time_ms']['q3']:.0f}), "
            f"peak {v['peak_bytes'] / 2**20:.1f} MiB")

if __name__ == "__main__":
    main()

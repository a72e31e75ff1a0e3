#!/usr/bin/env python3
"""make_example_profile.py: writes the bundled GPT-2-small example profile, a
*modeled* chain (docs/formats.md section 2, "measured": false) for the demo and the tests:

    python3 tools/make_example_profile.py --out tests/data/gpt2_small_example.profile.json

Plain Python, no torch, deterministic: the same command gives the same file.

The chain is GPT-2 small at block granularity: stage 0 = token + position
embeddings and their dropout, stages 1..12 = the transformer blocks, stage 13 =
ln_f + tied lm_head + cross-entropy, so a_L is the scalar loss and the logits
never cross a stage boundary (docs/formats.md section 1). Batch 8, sequence 1024, fp32,
explicit attention (the T x T scores are materialised), dropout 0.1 where GPT-2
has it.

Bytes come from counting, op by op, the tensors PyTorch's autograd keeps for
backward (tables below): fp32 tensors are 4 bytes per element, dropout masks are
bool, 1 byte per element. A stage's input is not in its saved_bytes: it is the
chain's a_i, counted once by the solver. This is the fp32 version of the count in
Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", section 4.1: their 34·s·b·h + 5·a·s²·b bytes per layer at 16 bits becomes
66·B·T·C + 9·B·H·T² here (their two LayerNorm inputs are, for us, this block's
input, not counted, and its output, counted).

Times come from a roofline of an NVIDIA A100-SXM4-40GB: each op takes
max(FLOPs / 19.5 TFLOP/s fp32, bytes moved / 1555 GB/s), the GPU's published
peaks; a backward costs twice its forward (two matmuls per forward matmul; an
elementwise backward reads a saved tensor and a gradient and writes a gradient).
Peaks are never reached, so the times are optimistic, but their ratios -- which
is what the solver trades -- are those of the real model.
"""

import argparse
import json
import os
import sys

# Shapes: B batch, T sequence, C channels (n_embd), H heads, V vocabulary.
B, T, C, H, V = 8, 1024, 768, 12, 50257
N_LAYER = 12
FP32 = 4            # bytes per fp32 element
MASK = 1            # bytes per element of a bool dropout mask
TOKEN_ID = 8        # int64 token ids

N = B * T * C       # elements of one B x T x C activation
S = B * H * T * T   # elements of one set of attention scores

# NVIDIA A100 datasheet (SXM4, 40 GB): fp32 without tensor cores, HBM2 bandwidth.
PEAK_FLOP_PER_S = 19.5e12
MEMORY_BYTES_PER_S = 1555e9
DEVICE_MEMORY_BYTES = 40 * 2**30
# PCIe 4.0 x16 moves 31.5 GB/s each way in theory; pinned copies reach about 80%.
LINK_BYTES_PER_S = 25e9

PARAMS = (V * C + T * C                                # wte (tied with lm_head), wpe
          + N_LAYER * (12 * C * C + 13 * C)            # per block: attn 4C², mlp 8C², biases, 2 LayerNorms
          + 2 * C)                                     # ln_f
# fp32 parameters, gradients and Adam's two moments.
STATIC_BYTES = 16 * PARAMS


# ---- what each stage keeps for backward (its output included), and transients ----

EMBED_SAVED = [
    ("position ids (wpe's embedding backward)", T * TOKEN_ID),
    ("dropout mask", N * MASK),
    ("output a_1", N * FP32),
]
EMBED_FWD_TMP = [  # live together at the add: token and position embeddings, their sum
    ("token embeddings", N * FP32),
    ("position embeddings", T * C * FP32),
    ("their sum (dropout's input)", N * FP32),
]
EMBED_BWD_TMP = [
    ("gradient of the sum", N * FP32),
    ("gradient of the position embeddings", T * C * FP32),
]

BLOCK_SAVED = [
    ("ln_1 mean and rstd", 2 * B * T * FP32),
    ("ln_1 output (c_attn's input)", N * FP32),
    ("q, k, v (q and k for the scores, v for att @ v)", 3 * N * FP32),
    ("softmax output (its backward needs it)", S * FP32),
    ("attention dropout mask", S * MASK),
    ("dropped probabilities (att @ v's input)", S * FP32),
    ("heads merged (attn c_proj's input)", N * FP32),
    ("residual dropout mask after attention", N * MASK),
    ("x + attention (ln_2's input)", N * FP32),
    ("ln_2 mean and rstd", 2 * B * T * FP32),
    ("ln_2 output (c_fc's input)", N * FP32),
    ("c_fc output (GELU's input)", 4 * N * FP32),
    ("GELU output (mlp c_proj's input)", 4 * N * FP32),
    ("residual dropout mask after the MLP", N * MASK),
    ("output a_{i+1}", N * FP32),
]
# (q @ k^T) then * 1/sqrt(hs) then masked_fill: two score-sized transients live at once.
BLOCK_FWD_TMP = [
    ("raw scores q @ k^T", S * FP32),
    ("scaled (then masked) scores", S * FP32),
]
# Softmax backward: the gradients of the dropped and of the plain probabilities live
# together, while the gradients of q, k, v and of the merged heads are formed.
BLOCK_BWD_TMP = [
    ("gradient of the dropped probabilities", S * FP32),
    ("gradient of the probabilities / scores", S * FP32),
    ("gradients of q, k, v and of the merged heads", 4 * N * FP32),
]

HEAD_SAVED = [
    ("ln_f mean and rstd", 2 * B * T * FP32),
    ("ln_f output (lm_head's input)", N * FP32),
    ("log-softmax output (cross-entropy's backward needs it)", B * T * V * FP32),
    ("output a_L: the scalar loss", FP32),
]
HEAD_FWD_TMP = [("logits", B * T * V * FP32)]
HEAD_BWD_TMP = [
    ("gradient of the log-probabilities", B * T * V * FP32),
    ("gradient of the logits", B * T * V * FP32),
]


# ---- forward ops: (name, FLOPs, bytes read + written) ----

def matmul(name, m, k, n, batch=1, weight=True):
    """batch x (m x k) @ (k x n); weights are read once, activations per batch."""
    flops = 2 * batch * m * k * n
    bytes_moved = FP32 * (batch * m * k + (k * n if weight else batch * k * n) + batch * m * n)
    return (name, flops, bytes_moved)


def elementwise(name, read_elems, write_elems, extra_bytes=0):
    return (name, 0, FP32 * (read_elems + write_elems) + extra_bytes)


def layernorm(name):
    return elementwise(name, N, N + 2 * B * T)


EMBED_OPS = [
    elementwise("wte gather", N, N, B * T * TOKEN_ID),
    elementwise("wpe gather", T * C, T * C),
    elementwise("add", N + T * C, N),
    elementwise("dropout", N, N, N * MASK),
]

BLOCK_OPS = [
    layernorm("ln_1"),
    matmul("c_attn", B * T, C, 3 * C),
    matmul("q @ k^T", T, C // H, T, batch=B * H, weight=False),
    elementwise("scale", S, S),
    elementwise("causal mask", S, S),
    elementwise("softmax", S, S),
    elementwise("attention dropout", S, S, S * MASK),
    matmul("att @ v", T, T, C // H, batch=B * H, weight=False),
    elementwise("merge heads", N, N),
    matmul("attn c_proj", B * T, C, C),
    elementwise("residual dropout", N, N, N * MASK),
    elementwise("residual add", 2 * N, N),
    layernorm("ln_2"),
    matmul("c_fc", B * T, C, 4 * C),
    elementwise("gelu", 4 * N, 4 * N),
    matmul("mlp c_proj", B * T, 4 * C, C),
    elementwise("residual dropout", N, N, N * MASK),
    elementwise("residual add", 2 * N, N),
]

HEAD_OPS = [
    layernorm("ln_f"),
    matmul("lm_head (tied wte)", B * T, C, V),
    elementwise("log_softmax", B * T * V, B * T * V),
    elementwise("nll_loss", B * T, 1, B * T * TOKEN_ID),
]


def roofline_ms(ops):
    return 1e3 * sum(max(flops / PEAK_FLOP_PER_S, bytes_moved / MEMORY_BYTES_PER_S)
                     for _, flops, bytes_moved in ops)


def total(table):
    return sum(b for _, b in table)


def stage(name, ops, saved, fwd_tmp, bwd_tmp, out_bytes):
    fwd_ms = roofline_ms(ops)
    return {
        "name": name,
        "fwd_ms": round(fwd_ms, 4),
        "bwd_ms": round(2 * fwd_ms, 4),
        "out_bytes": out_bytes,
        "saved_bytes": total(saved),
        "fwd_tmp_bytes": total(fwd_tmp),
        "bwd_tmp_bytes": total(bwd_tmp),
    }


def make_profile():
    stages = [stage("embed", EMBED_OPS, EMBED_SAVED, EMBED_FWD_TMP, EMBED_BWD_TMP, N * FP32)]
    stages += [stage(f"block.{i}", BLOCK_OPS, BLOCK_SAVED, BLOCK_FWD_TMP, BLOCK_BWD_TMP, N * FP32)
               for i in range(N_LAYER)]
    stages.append(stage("ln_f+head+loss", HEAD_OPS, HEAD_SAVED, HEAD_FWD_TMP, HEAD_BWD_TMP, FP32))
    for s in stages:
        assert s["saved_bytes"] >= s["out_bytes"], s["name"]
    return {
        "format": "memopt.profile",
        "version": 1,
        "note": ("MODELED, not measured: byte sizes from an analytic count of the tensors autograd saves "
                 "(fp32 4 B, dropout masks 1 B), times from an A100-SXM4-40GB roofline "
                 "(19.5 TFLOP/s fp32, 1555 GB/s HBM; backward = 2 x forward). "
                 "Regenerate with `python3 tools/make_example_profile.py --out "
                 "tests/data/gpt2_small_example.profile.json`; the script documents every tensor."),
        "model": {"name": "gpt2", "n_layer": N_LAYER, "n_embd": C, "n_head": H, "vocab": V,
                  "seq_len": T, "batch": B, "dtype": "float32", "granularity": "block",
                  "attention": "explicit", "dropout": 0.1},
        "device": {"kind": "cuda", "name": "NVIDIA A100-SXM4-40GB (modeled)", "memory_bytes": DEVICE_MEMORY_BYTES,
                   "peak_fp32_flop_per_s": PEAK_FLOP_PER_S, "memory_bytes_per_s": MEMORY_BYTES_PER_S},
        "measured": False,
        "input_bytes": B * T * TOKEN_ID,
        "static_bytes": STATIC_BYTES,
        "link": {"d2h_bytes_per_s": LINK_BYTES_PER_S, "h2d_bytes_per_s": LINK_BYTES_PER_S},
        # The cross-entropy is inside the last stage; what is left is d(loss)/d(loss) = 1.
        "loss": {"bwd_ms": 0.0, "bwd_tmp_bytes": 0},
        "stages": stages,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "data",
                                                      "gpt2_small_example.profile.json"))
    args = parser.parse_args()
    profile = make_profile()
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(profile, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)
    stages = profile["stages"]
    store_all = profile["input_bytes"] + sum(s["saved_bytes"] for s in stages)
    print(f"wrote {args.out}: {len(stages)} stages, {PARAMS:,} parameters, "
          f"saved activations {store_all / 2**30:.2f} GiB, "
          f"forward + backward {sum(s['fwd_ms'] + s['bwd_ms'] for s in stages):.1f} ms (modeled)",
          file=sys.stderr)


if __name__ == "__main__":
    main()

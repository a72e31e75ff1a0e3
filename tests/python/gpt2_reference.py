"""gpt2_reference.py: the independent reference for memopt's C++ GPT-2.

Builds a small random Hugging Face GPT2LMHeadModel (eager attention, dropout 0),
saves it as a --hf-dir (config.json + model.safetensors), runs one forward and
backward on a random batch, and writes the batch and the results to
reference.safetensors in the same directory:
  input_ids, targets (int64), logits, loss, and grad.<parameter name> for every
  parameter (Hugging Face names, Conv1D weights in their stored [in, out] layout).
The loss is mean cross-entropy of logits against targets, with no label shift,
which is what memopt's head stage computes.

Run (tests/model/gpt2_hf_test.cpp does this):
  .venv/bin/python tests/python/gpt2_reference.py OUT_DIR --n-layer 2 --n-embd 64 \
      --n-head 4 --vocab 96 --n-positions 32 --batch 2 --seq 24 --seed 7
"""
import argparse
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--n-positions", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    config = GPT2Config(
        vocab_size=args.vocab, n_positions=args.n_positions, n_embd=args.n_embd,
        n_layer=args.n_layer, n_head=args.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, activation_function="gelu_new", bos_token_id=0, eos_token_id=0,
        # Randomised LayerNorm and biases below: GPT-2's own init leaves them at 1 and 0,
        # which would let a wrong bias or gain go unnoticed.
    )
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).train()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(0.1 * torch.randn_like(p))
    os.makedirs(args.out_dir, exist_ok=True)
    model.save_pretrained(args.out_dir, safe_serialization=True)

    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(args.vocab, (args.batch, args.seq + 1), generator=g)
    input_ids, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    logits = model(input_ids=input_ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
    loss.backward()

    out = {"input_ids": input_ids, "targets": targets,
           "logits": logits.detach().contiguous(), "loss": loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().contiguous()
    save_file(out, os.path.join(args.out_dir, "reference.safetensors"))


if __name__ == "__main__":
    main()

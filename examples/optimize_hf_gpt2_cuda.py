"""optimize_hf_gpt2_cuda.py: the same on a GPU -- GPT-2 small on CUDA, a batch of 8 x
1024 tokens, trained under bfloat16 autocast, offloading over the GPU's own link.
Run by the CUDA tests (tests/python/test_cuda_readme_example.py); the README shows this
file verbatim.
    .venv/bin/python examples/optimize_hf_gpt2_cuda.py
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import memopt

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config()).cuda().train()  # GPT-2 small, dropout 0.1
ids = torch.randint(0, model.config.vocab_size, (8, 1024), device="cuda")

# Profile under the autocast the training step runs in, and plan for 40% of the
# activation peak of storing everything; offloading uses this GPU's pinned copy link,
# measured now.
with torch.autocast("cuda", dtype=torch.bfloat16):
    model = memopt.optimize(model, ids, budget="40%", link="measured")
plan = model.memopt_plan
print(f"plan: predicted peak {plan.predicted['peak_bytes']} B within {plan.budget_bytes} B, "
      f"{plan.predicted['time_ms']:.0f} ms per step")

opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(3):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()  # outside autocast, as usual; recomputations run under the forward's
    opt.step()
    opt.zero_grad()
    print(f"step {step}  loss {loss.item():.4f}  "
          f"GPU memory at its peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")

"""optimize_hf_gpt2.py: memopt from Python, on a Hugging Face GPT-2 as it is.
Run by the test suite (tests/python/test_readme_example.py); the README shows this
file verbatim.
    .venv/bin/python examples/optimize_hf_gpt2.py
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import memopt

torch.manual_seed(0)
config = GPT2Config(vocab_size=256, n_layer=4, n_embd=128, n_head=4, n_positions=128,
                    bos_token_id=0, eos_token_id=0)  # dropout 0.1, as GPT-2
model = GPT2LMHeadModel(config).train()
ids = torch.randint(0, config.vocab_size, (2, 128))

# Profile the model on a sample batch and plan for half of the activation peak of
# storing everything; offloading may use a copy link as fast, relative to compute,
# as an H100's PCIe 5. The same model object comes back.
model = memopt.optimize(model, ids, budget="50%", link="h100-sxm:pcie5")
plan = model.memopt_plan
print(f"plan: predicted peak {plan.predicted['peak_bytes']} B within {plan.budget_bytes} B, "
      f"{plan.predicted['time_ms']:.0f} ms per step")

# The training loop is the usual one.
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()  # recomputes, offloads and prefetches as planned
    opt.step()
    opt.zero_grad()
    print(f"step {step}  loss {loss.item():.4f}")

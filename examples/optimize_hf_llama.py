"""optimize_hf_llama.py: memopt from Python, on a Hugging Face Llama as it is, with
batches of varying length. Run by the test suite (tests/python/test_readme_example.py);
docs/python.md shows this file verbatim.
    .venv/bin/python examples/optimize_hf_llama.py
"""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import memopt

torch.manual_seed(0)
config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=2)  # grouped-query attention
model = LlamaForCausalLM(config).train()
longest = torch.randint(0, config.vocab_size, (2, 128))

# Profile on the largest batch the training will see and plan for 40% of the
# activation peak of storing everything, offloading over a 2 GB/s link where that
# is faster than recomputing. Shorter batches get plans of their own, within the
# same bytes, from how the profile scales with the shape.
model = memopt.optimize(model, longest, budget="40%", link="2GB/s")
print(f"plan: predicted peak {model.memopt_plan.predicted['peak_bytes']} B "
      f"within {model.memopt_plan.budget_bytes} B")

opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step, length in enumerate([128, 96, 128, 57]):  # dynamic padding: every batch its own length
    ids = longest[:, :length]
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step}  length {length}  loss {loss.item():.4f}")
print("planned shapes:", sorted(model.memopt_plans))

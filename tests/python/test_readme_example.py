"""The documentation's Python examples are the files the tests run: README.md quotes
examples/optimize_hf_gpt2.py and examples/optimize_hf_gpt2_cuda.py, docs/python.md
examples/optimize_hf_llama.py, verbatim, and they run (the GPU one in
tests/python/test_cuda_readme_example.py)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = [os.path.join(ROOT, "examples", name) for name in ("optimize_hf_gpt2.py", "optimize_hf_llama.py")]
QUOTED_IN = {"optimize_hf_gpt2.py": "README.md", "optimize_hf_gpt2_cuda.py": "README.md",
             "optimize_hf_llama.py": os.path.join("docs", "python.md")}


@pytest.mark.parametrize("example", [os.path.join(ROOT, "examples", name) for name in QUOTED_IN])
def test_the_docs_quote_the_example_verbatim(example):
    with open(os.path.join(ROOT, QUOTED_IN[os.path.basename(example)])) as f:
        readme = f.read()
    with open(example) as f:
        assert "```python\n" + f.read() + "```" in readme


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_trains_within_its_plan(example, tmp_path):
    run = subprocess.run([sys.executable, example], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    plan = re.search(r"plan: predicted peak (\d+) B within (\d+) B", run.stdout)
    assert plan and int(plan.group(1)) <= int(plan.group(2))
    losses = [float(x) for x in re.findall(r"step \d .*loss ([0-9.]+)", run.stdout)]
    assert len(losses) in (3, 4) and losses[2] < losses[0]
    assert "profiling a batch" not in run.stderr  # the Llama's shorter batches: planned from the shape law

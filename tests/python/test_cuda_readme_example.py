"""The README's GPU example (examples/optimize_hf_gpt2_cuda.py) runs on a GPU: its plan
fits its budget, each step's GPU memory at its peak is printed, and the loss falls.
Skips itself without a GPU or without the CUDA backend; tests/python/test_readme_example.py
checks on any machine that the README quotes the file verbatim."""
import os
import re
import subprocess
import sys

import pytest
import torch

import memopt

pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible"),
    pytest.mark.skipif(not memopt._core.cuda_built(), reason="this memopt package has no CUDA backend"),
]

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "examples", "optimize_hf_gpt2_cuda.py")


def test_the_gpu_example_trains_within_its_plan(tmp_path):
    run = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    plan = re.search(r"plan: predicted peak (\d+) B within (\d+) B", run.stdout)
    assert plan and int(plan.group(1)) <= int(plan.group(2))
    steps = re.findall(r"step \d  loss ([0-9.]+)  GPU memory at its peak ([0-9.]+) GiB", run.stdout)
    assert len(steps) == 3, run.stdout
    losses = [float(loss) for loss, _ in steps]
    assert losses[2] < losses[0]

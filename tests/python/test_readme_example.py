"""The README's Python example is examples/optimize_hf_gpt2.py verbatim, and it runs."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "optimize_hf_gpt2.py")


def test_readme_quotes_the_example_verbatim():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    with open(EXAMPLE) as f:
        assert "```python\n" + f.read() + "```" in readme


def test_the_example_trains_within_its_plan(tmp_path):
    run = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    plan = re.search(r"plan: predicted peak (\d+) B within (\d+) B", run.stdout)
    assert plan and int(plan.group(1)) <= int(plan.group(2))
    losses = [float(x) for x in re.findall(r"step \d  loss ([0-9.]+)", run.stdout)]
    assert len(losses) == 3 and losses[2] < losses[0]

#!/usr/bin/env bash
# make_python_variants_report.sh: the Python package's two options for a causal LM,
# measured against what users run today on Hugging Face's GPT2LMHeadModel as it is
# (eager attention, dropout 0.1): memopt with its stages compiled (compile_stages=True)
# and with its head's loss computed by chunks (chunked_loss=True), beside plain
# training, HF's gradient checkpointing, torch.compile with activation_memory_budget
# 0.5 and memopt's eager stages, each memopt variant at hf-ckpt's and at compile's
# measured peak, recompute-only and offloading over an emulated H100 PCIe 5 link.
# MEASURED on this CPU, one compute thread, one process, steps interleaved.
#   tools/make_python_variants_report.sh    (after scripts/build.sh)
# Writes results/python-compiled-chunked-cpu/. Measure on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${MEMOPT_PYTHON:-.venv/bin/python}
dir=results/python-compiled-chunked-cpu
mkdir -p "$dir"
: > "$dir/commands.txt"
run() {  # records the command with the venv's python as `python`, then runs it
  { printf 'python'; printf ' %q' "$@"; echo; } >> "$dir/commands.txt"
  PYTHONPATH=build/python "$python" "$@"
}
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/commands.txt"
# Two shapes: GPT-2 small with fewer rows (B x T) than its width, where the weight's
# gradient outweighs the logits, and a narrower model with four times more rows than
# its width, as in training on a GPU (Note [A chunked head] in python/memopt/_chunked_loss.py).
flags=(--links h100-sxm:pcie5 --compile-budgets 0.5 --budgets "" --memopt-compiled --memopt-chunked-loss)
run tools/bench_hf_python.py --layers 12 --embd 768 --heads 12 --batch 1 --seq 256 "${flags[@]}" --out "$dir/small.json"
run tools/bench_hf_python.py --layers 8 --embd 256 --heads 4 --batch 4 --seq 256 "${flags[@]}" --out "$dir/c256.json"
run tools/plot_hf_python.py --out "$dir" \
  --case "GPT-2 small (12 layers, C=768), B=1, T=256" "$dir/small.json" \
  --case "8 layers, C=256, B=4, T=256" "$dir/c256.json"
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/commands.txt"

#!/usr/bin/env bash
# make_python_report.sh: regenerates the Python package's benchmark -- Hugging Face's
# GPT2LMHeadModel as it is (eager attention, dropout 0.1) trained plainly, with HF's
# gradient checkpointing, and with memopt.optimize at hf-ckpt's measured peak
# (recompute-only, and offloading over emulated H100 PCIe 5 and GH200 NVLink-C2C links)
# and at 80% of the store-all peak. MEASURED on this CPU, one compute thread, one
# process per shape, steps interleaved.
#   tools/make_python_report.sh    (after scripts/build.sh)
# Writes results/python-hf-gpt2-cpu/. Measure on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${MEMOPT_PYTHON:-.venv/bin/python}
date=${1:-$(date +%F)}
dir=results/python-hf-gpt2-cpu
mkdir -p "$dir"
: > "$dir/commands.txt"
run() {  # records the command with the venv's python as `python`, then runs it
  { printf 'python'; printf ' %q' "$@"; echo; } >> "$dir/commands.txt"
  PYTHONPATH=build/python "$python" "$@"
}
run tools/bench_hf_python.py --layers 12 --embd 768 --heads 12 --batch 1 --seq 256 --out "$dir/small.json"
run tools/bench_hf_python.py --layers 8 --embd 256 --heads 4 --batch 4 --seq 256 --out "$dir/c256.json"
run tools/plot_hf_python.py --out "$dir" \
  --case "GPT-2 small (12 layers, C=768), B=1, T=256" "$dir/small.json" \
  --case "8 layers, C=256, B=4, T=256" "$dir/c256.json"
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after the runs: $load" >> "$dir/commands.txt"

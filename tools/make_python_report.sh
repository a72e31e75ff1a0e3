#!/usr/bin/env bash
# make_python_report.sh: regenerates the Python package's benchmark on Hugging Face's
# GPT2LMHeadModel as it is (eager attention, dropout 0.1): trained plainly, with HF's
# gradient checkpointing, and with memopt.optimize at hf-ckpt's measured peak
# (recompute-only, and offloading over emulated H100 PCIe 5 and GH200 NVLink-C2C links)
# and at 80% of the store-all peak. MEASURED on this CPU, one compute thread, one
# process per shape, steps interleaved.
#   tools/make_python_report.sh            -> results/python-hf-gpt2-cpu/
#   tools/make_python_report.sh variants   -> results/python-compiled-chunked-cpu/: the
#       package's two options for a causal LM, memopt's stages compiled
#       (compile_stages=True) and its head's loss by chunks (chunked_loss=True), beside
#       eager memopt, plain training, HF's checkpointing and torch.compile with
#       activation_memory_budget 0.5, each memopt variant at hf-ckpt's and at compile's
#       measured peak, recompute-only and over the H100 PCIe 5 link
# Run after scripts/build.sh, on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${MEMOPT_PYTHON:-.venv/bin/python}
case "${1:-}" in
  "") dir=results/python-hf-gpt2-cpu flags=() ;;
  variants)
    dir=results/python-compiled-chunked-cpu
    flags=(--links h100-sxm:pcie5 --compile-budgets 0.5 --budgets "" --memopt-compiled --memopt-chunked-loss) ;;
  *) echo "make_python_report.sh: '$1' is not a report (none, or variants)" >&2; exit 2 ;;
esac
mkdir -p "$dir"
: > "$dir/commands.txt"
run() {  # records the command with the venv's python as `python`, then runs it
  { printf 'python'; printf ' %q' "$@"; echo; } >> "$dir/commands.txt"
  PYTHONPATH=build/python "$python" "$@"
}
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/commands.txt"
# Two shapes: GPT-2 small with fewer rows (B x T) than its width, and a narrower model
# with four times more rows than its width, as in training on a GPU.
run tools/bench_hf_python.py --layers 12 --embd 768 --heads 12 --batch 1 --seq 256 "${flags[@]}" --out "$dir/small.json"
run tools/bench_hf_python.py --layers 8 --embd 256 --heads 4 --batch 4 --seq 256 "${flags[@]}" --out "$dir/c256.json"
run tools/plot_hf_python.py --out "$dir" \
  --case "GPT-2 small (12 layers, C=768), B=1, T=256" "$dir/small.json" \
  --case "8 layers, C=256, B=4, T=256" "$dir/c256.json"
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/commands.txt"

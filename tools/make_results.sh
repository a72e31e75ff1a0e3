#!/usr/bin/env bash
# make_results.sh: regenerates the reports of results/ at this commit -- every question's
# current answer -- one after another, or only those named.
#   tools/make_results.sh               every report this machine can make (not the GPU's)
#   tools/make_results.sh NAME ...      only these (results/NAME), in this order
#   tools/make_results.sh --list        the names, each with what it answers
# Run after scripts/test.sh (the build, the Python package, highspy), on an idle
# machine: most reports are MEASURED here and time the CPU. Each step prints its wall
# time; each report's README names its own command, machine and spreads. The GPU's
# report (results/gpu-h200-gpt2-small) is made on a GPU by scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${MEMOPT_PYTHON:-.venv/bin/python}

# name | the question | the command
reports=(
  "tradeoff-tiny-cpu|the demo's trade-off, measured|MEMOPT_MODELED=0 tools/make_reports.sh"
  "modeled-gpt2|GPT-2 small and xl on V100 and H100, modeled|MEMOPT_MEASURED=0 tools/make_reports.sh"
  "offload-emulated-cpu|offloading under emulated GPU links, measured|tools/make_offload_report.sh"
  "link-emulation-cpu|the link emulation's achieved rates|tools/make_link_report.sh"
  "op-granularity|blocks against operator stages against the hand rules, modeled|tools/make_op_granularity_report.sh"
  "op-stages-over-links|operator stages against blocks over host links, modeled|tools/make_op_links_report.sh"
  "op-granularity-cpu|operator stages measured on the testbed|tools/make_op_measured_report.sh"
  "chunked-loss-cpu|ATen's loss against the chunked one|tools/make_loss_report.sh"
  "python-hf-gpt2-cpu|Python on HF GPT-2 against HF's checkpointing|tools/make_python_report.sh"
  "python-compiled-chunked-cpu|Python: compiled stages and a chunked head against torch.compile and HF's checkpointing|tools/make_python_report.sh variants"
  "python-llama-cpu|Python on a HF Llama against HF's checkpointing|grep -v \"^load average\" results/python-llama-cpu/commands.txt | bash"
  "kernels-cpu|memopt's kernels against ATen's on the CPU|tools/make_kernels_report.sh"
  "solver-bench|the solver benchmark|tools/run_solver_bench.sh"
  "solver-compare|memopt's DP against rotor's on the same chains|$python tools/solver_compare.py --out results/solver-compare"
  "copy-placement-milp|optimal's copy placement against a MILP|PYTHONPATH=build/python $python tools/check_copy_placement.py --out results/copy-placement-milp --gpt2 results/copy-placement-milp/gpt2_8l.profile.json --gpt2 results/copy-placement-milp/gpt2_small.profile.json --budgets 30%,40%,50%,65%,80%"
)

if [ "${1:-}" = --list ]; then
  for r in "${reports[@]}"; do IFS='|' read -r name what _ <<<"$r"; printf '%-22s %s\n' "$name" "$what"; done
  exit 0
fi
wanted=("$@")
known=" $(for r in "${reports[@]}"; do printf '%s ' "${r%%|*}"; done)"
for w in "${wanted[@]}"; do
  case "$known" in *" $w "*) ;; *) echo "make_results.sh: no report named $w; tools/make_results.sh --list names them" >&2; exit 2 ;; esac
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load (other work skews the measured reports)"
for r in "${reports[@]}"; do
  IFS='|' read -r name what command <<<"$r"
  if [ ${#wanted[@]} -gt 0 ]; then
    case " ${wanted[*]} " in *" $name "*) ;; *) continue ;; esac
  fi
  echo "== $name: $what"
  start=$(date +%s)
  bash -c "$command"
  echo "== $name: $(( $(date +%s) - start )) s"
done

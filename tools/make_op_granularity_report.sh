#!/usr/bin/env bash
# make_op_granularity_report.sh: how much activation memory each plan saves at 5% and
# at 10% predicted overhead on MODELED GPT-2 profiles (`memopt estimate`: analytic
# bytes, roofline times), with blocks as stages and with operator stages (Note
# [Operator stages] in gpt2/stages.h): the exact DP on each, and Megatron's selective
# recomputation and the pointwise rule on the operator stages. Solver only: every
# number is the simulator's prediction; nothing is run. No host link (--bandwidth
# none): the DP is the recompute DP ("recompute-only", which is `optimal` without a link).
#   tools/make_op_granularity_report.sh
#   SLOTS=N (default 2000): the DP's slots. Each resident object is rounded up to a slot,
#   so a chain of 8x the stages needs finer slots to waste as little of the budget
#   (the README beside the results shows how much 500 slots lose).
# Writes results/op-granularity/: the profiles, one tradeoff report per case and
# granularity (and one with memopt's own kernels), savings.md, savings.png, tradeoff.png, stage_map.png (tools/plot_op_granularity.py)
# and commands.txt. The README beside them is written by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build-notorch/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
slots=${SLOTS:-2000}
dir=results/op-granularity
mkdir -p "$dir"
commands=$dir/commands.txt
: > "$commands"
run() {  # logs the command as a user would type it, then runs it
  echo "memopt $*" >> "$commands"
  "$memopt" "$@" > /dev/null 2>&1
}
cases=()
for preset in xl small; do
  for gpu in h100-80gb a100-80gb; do
    for attention in explicit sdpa; do
      name=$preset-$gpu-$attention
      echo "== $name" >&2
      for g in block op; do
        run estimate --preset "$preset" --gpu "$gpu" --batch 8 --seq 1024 --dtype bf16 --granularity "$g" \
          --attention "$attention" --out "$dir/$name-$g.profile.json"
      done
      # The same budgets in bytes for both granularities: fractions of the block
      # profile's store-all peak, so that "memory saved" has one reference.
      run tradeoff --profile "$dir/$name-block.profile.json" --budgets 4%:100%:4% --bandwidth none \
        --solvers recompute-only,store-all --slots "$slots" --threads 0 --no-plot --out "$dir/$name-block"
      budgets=$("$python" -c 'import json, sys; print(",".join(f"{b}B" for b in json.load(open(sys.argv[1]))["budgets_bytes"]))' \
        "$dir/$name-block/tradeoff.json")
      run tradeoff --profile "$dir/$name-op.profile.json" --budgets "$budgets" --bandwidth none \
        --solvers recompute-only,selective,pointwise,store-all --slots "$slots" --threads 0 --no-plot --out "$dir/$name-op"
      cases+=(--case "$preset, $gpu, $attention" "$dir/$name-block/tradeoff.json" "$dir/$name-op/tradeoff.json")
    done
  done
done
# memopt's own kernels (every dropout regenerates its mask): xl, H100, explicit
# attention, operator stages, at the block grid's budgets from 40% to 72%.
name=xl-h100-80gb-explicit-memopt-kernels
echo "== $name" >&2
run estimate --preset xl --gpu h100-80gb --batch 8 --seq 1024 --dtype bf16 --granularity op \
  --attention explicit --kernels memopt --out "$dir/$name-op.profile.json"
budgets=$("$python" -c 'import json, sys; print(",".join(f"{b}B" for b in json.load(open(sys.argv[1]))["budgets_bytes"][9:18]))' \
  "$dir/xl-h100-80gb-explicit-block/tradeoff.json")
run tradeoff --profile "$dir/$name-op.profile.json" --budgets "$budgets" --bandwidth none \
  --solvers recompute-only,store-all --slots "$slots" --threads 0 --no-plot --out "$dir/$name-op"
"$python" tools/plot_op_granularity.py --out "$dir" "${cases[@]}"
echo "report in $dir (savings.md, savings.png, tradeoff.png, stage_map.png, commands.txt)"

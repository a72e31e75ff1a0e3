#!/usr/bin/env bash
# make_offload_report.sh: regenerates the offloading benchmark under emulated GPU links
# -- two GPT-2 shapes profiled on this CPU (stage times from warm training steps), the
# copy engine capped at an H100's PCIe 5 and at a GH200's NVLink-C2C, each scaled to
# this CPU's compute rate (docs/formats.md, "Where the numbers come from") -- and the measured step time
# of optimal, recompute-only, offload-all and store-all at 30%..90% of the store-all
# activation peak, interleaved in one process per link, with their spreads.
#   tools/make_offload_report.sh     (after scripts/build.sh)
#   MEMOPT_OFFLOAD_MODELS="8l"  limits the models (8l: 8 layers C=256 sublayer; small:
#                               GPT-2 small's 12 layers C=768)
# Writes results/offload-emulated-cpu/: one tradeoff report per model and link
# (README, tradeoff.json, figures), the profiles and their printouts, and README.md
# with the summary table and figure (tools/offload_summary.py).
# Measure on an idle machine: nothing else running (check `uptime`).
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
date=${1:-$(date +%F)}
dir=results/offload-emulated-cpu
mkdir -p "$dir"
declare -A shapes=(
  [8l]="--n-layer 8 --n-embd 256 --n-head 4 --vocab 8192 --n-positions 256 --batch 4 --seq 256 --granularity sublayer"
  [small]="--preset small --vocab 8192 --batch 1 --seq 256 --granularity sublayer"
)
for model in ${MEMOPT_OFFLOAD_MODELS:-8l small}; do
  profile=$dir/gpt2_$model.profile.json
  args="profile ${shapes[$model]} --out $profile"
  echo "== $model: memopt $args" >&2
  "$memopt" $args > "$dir/gpt2_$model.profile.txt"
  for link in h100-sxm:pcie5 gh200:nvlink-c2c; do
    out=$dir/$model-${link%%:*}
    "$memopt" tradeoff --profile "$profile" --emulate "$link" --budgets 30%:90%:10% \
      --solvers optimal,recompute-only,offload-all,store-all --run --steps 5 --warmup-steps 2 --out "$out"
    # Recorded as `memopt ...`, like the report's own command: never this machine's path.
    printf '\n## Profile\n\nThe profile was made with:\n\n```sh\nmemopt %s\n```\n' "$args" >> "$out/README.md"
  done
done
"$python" tools/offload_summary.py "$dir" --command "tools/make_offload_report.sh"
echo "report in $dir/README.md"

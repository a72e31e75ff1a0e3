#!/usr/bin/env bash
# make_op_links_report.sh: `optimal` on operator stages against `optimal` on blocks when
# a host link can take saved bytes off the device. MODELED: the profiles are
# results/op-granularity's (`memopt estimate`: analytic bytes, roofline times; run
# tools/make_op_granularity_report.sh first), every time is the simulator's prediction.
#   tools/make_op_links_report.sh
# GPT-2 small (B=8, T=1024, bf16) on the H100 and the A100, explicit and sdpa attention,
# over each profile's own PCIe link, and for the H100 also over a 400 GB/s link; both
# granularities get the block report's budgets in bytes, so "faster" compares plans
# under the same byte budget. Then GPT-2 XL on the H100 (explicit attention) over its
# own link at 24% to 52% of the block profile's store-all peak.
# Writes results/op-stages-over-links/: one tradeoff report per case and granularity,
# comparison.md (every budget of the small cases), xl.md and commands.txt. The README
# beside them is written by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build-notorch/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
profiles=results/op-granularity
dir=results/op-stages-over-links
mkdir -p "$dir"
commands=$dir/commands.txt
: > "$commands"
run() {  # logs the command as a user would type it, then runs it
  echo "memopt $*" >> "$commands"
  "$memopt" "$@" > /dev/null 2>&1
}
block_budgets() {  # the block report's budgets in bytes, entries FIRST..LAST (1-based) or all
  "$python" -c 'import json, sys
b = json.load(open(sys.argv[1]))["budgets_bytes"]
lo, hi = int(sys.argv[2]), int(sys.argv[3])
print(",".join(f"{x}B" for x in b[lo - 1:hi if hi else None]))' "$1" "${2:-1}" "${3:-0}"
}
for f in "$profiles"/small-h100-80gb-explicit-block/tradeoff.json "$profiles"/xl-h100-80gb-explicit-block/tradeoff.json; do
  [[ -f $f ]] || { echo "make_op_links_report: $f is missing; run tools/make_op_granularity_report.sh first" >&2; exit 2; }
done

{
  echo "| case | budget | blocks ms | operator stages ms | op / blocks |"
  echo "|---|---:|---:|---:|---:|"
} > "$dir/comparison.md"
summary=()
for case in small-h100-80gb-explicit small-h100-80gb-sdpa small-a100-80gb-explicit small-a100-80gb-sdpa; do
  links=(own)
  [[ $case == *h100* ]] && links+=(400GB/s)
  budgets=$(block_budgets "$profiles/$case-block/tradeoff.json")
  for link in "${links[@]}"; do
    flags=()
    [[ $link == own ]] || flags=(--bandwidth "$link")
    tag=$case-${link//\//}
    echo "== $tag" >&2
    run tradeoff --profile "$profiles/$case-block.profile.json" --budgets "$budgets" "${flags[@]}" \
      --solvers optimal,recompute-only,store-all --slots 500 --threads 0 --no-plot --out "$dir/$tag-block"
    run tradeoff --profile "$profiles/$case-op.profile.json" --budgets "$budgets" "${flags[@]}" \
      --solvers optimal,recompute-only,selective,pointwise,store-all --slots 500 --threads 0 --no-plot --out "$dir/$tag-op"
    out=$("$python" tools/compare_granularities.py "$dir/$tag-block" "$dir/$tag-op" --label "$tag")
    grep '^|' <<< "$out" >> "$dir/comparison.md"
    summary+=("$(grep -v '^|' <<< "$out")")
  done
done
{ echo; printf -- '- %s\n' "${summary[@]}"; } >> "$dir/comparison.md"

# GPT-2 XL: the block report's budgets 6..13 of 4%:100%:4%, that is 24% .. 52%.
xl=xl-h100-80gb-explicit
budgets=$(block_budgets "$profiles/$xl-block/tradeoff.json" 6 13)
echo "== $xl" >&2
for g in block op; do
  run tradeoff --profile "$profiles/$xl-$g.profile.json" --budgets "$budgets" \
    --solvers optimal,store-all --slots 500 --threads 0 --no-plot --out "$dir/$xl-own-$g"
done
{
  echo "| case | budget | blocks ms | operator stages ms | op / blocks | operator-stage plan's peak (store-all / peak) |"
  echo "|---|---:|---:|---:|---:|---:|"
  "$python" tools/compare_granularities.py "$dir/$xl-own-block" "$dir/$xl-own-op" --label "$xl-own" --peak | grep '^|'
} > "$dir/xl.md"
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$commands"
echo "report in $dir (comparison.md, xl.md, commands.txt)"

#!/usr/bin/env bash
# make_optimal_links_report.sh: how much faster than recompute-only `optimal` plans
# are, before and after a solver change, on the two GPT-2 profiles measured on this
# CPU for the offloading benchmark (results/2026-11-24-offload-emulated-cpu), under
# each emulated GPU link (docs/formats.md, "Where the numbers come from": the link at that GPU's ratio
# of link bandwidth to compute). Solver only: every time is the timeline simulator's
# prediction; nothing is run.
#   tools/make_optimal_links_report.sh OLD_MEMOPT [DATE] [OLD_LABEL]
#     OLD_MEMOPT  a `memopt` binary built from the commit to compare with (a
#                 torch-free build is enough: `git archive REV | tar -x -C DIR`, then
#                 cmake -S DIR -B DIR/build -DMEMOPT_TORCH=OFF and build the target memopt)
#     OLD_LABEL   the commit, recorded in commands.txt (default: unknown)
# Writes results/DATE-optimal-links/: new-*/ and old-*/ tradeoff reports,
# speedup.md and speedup.png (tools/plot_offload_speedup.py), commands.txt. The README
# beside them is written by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
old_memopt=${1:?usage: tools/make_optimal_links_report.sh OLD_MEMOPT [DATE] [OLD_LABEL]}
date=${2:-$(date +%F)}
old_label=${3:-unknown}
memopt=${MEMOPT:-build-notorch/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
profiles=results/2026-11-24-offload-emulated-cpu
dir=results/$date-optimal-links
mkdir -p "$dir"
links="v100:pcie3 a100:pcie4 h100-sxm:pcie5 gh200:nvlink-c2c"
commands=$dir/commands.txt
: > "$commands"
cases=()
for model in small 8l; do
  for link in $links; do
    name=$model-${link%%:*}
    common="--profile $profiles/gpt2_$model.profile.json --budgets 10%:100%:5% --solvers optimal,recompute-only --threads 1 --no-plot"
    args="tradeoff $common --emulate $link --out $dir/new-$name"
    echo "memopt $args" >> "$commands"
    echo "== $name" >&2
    "$memopt" $args > /dev/null 2>&1
    # The old binary may predate --emulate: it gets the link's rate, as the new one resolved it.
    rate=$("$python" -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["link_bytes_per_s"]))' "$dir/new-$name/tradeoff.json")
    args="tradeoff $common --bandwidth ${rate}B/s --out $dir/old-$name"
    echo "memopt (old) $args" >> "$commands"
    "$old_memopt" $args > /dev/null 2>&1
    case $model in small) shape="GPT-2 small";; 8l) shape="8 layers, C=256";; esac
    cases+=(--case "$shape, $link" "$dir/old-$name/tradeoff.json" "$dir/new-$name/tradeoff.json")
  done
done
"$python" tools/plot_offload_speedup.py --out "$dir" "${cases[@]}"
echo "old = $old_label" >> "$commands"
echo "report in $dir (speedup.md, speedup.png, commands.txt)"

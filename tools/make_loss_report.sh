#!/usr/bin/env bash
# make_loss_report.sh: regenerates the loss report -- GPT-2's head with ATen's loss
# against the chunked one (--loss chunked), before and after:
#   - MEASURED on this CPU: GPT-2 small, half-block stages, B=1 at T=256 and at T=1024
#     (the longest its position table holds): each loss's profile, its smallest
#     feasible budget and its trade-off curve (predicted from the measured profile);
#   - MODELED: GPT-2 xl on an H100-80GB in bf16, same shapes (memopt estimate);
#   - the head stage's time with each loss (tests/bench/head_loss_bench, one process,
#     repetitions interleaved at random).
#   tools/make_loss_report.sh     (after scripts/build.sh)
# Writes results/chunked-loss-cpu/. Measure on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build/tools/memopt}
python=${MEMOPT_PYTHON:-.venv/bin/python}
date=${1:-$(date +%F)}
dir=results/chunked-loss-cpu
mkdir -p "$dir"
: > "$dir/commands.txt"
run() {  # records the command as `memopt ...` (never this machine's path), then runs it
  echo "memopt $*" >> "$dir/commands.txt"
  "$memopt" "$@"
}

for seq in 256 1024; do
  for loss in aten chunked; do
    name=small-t$seq-$loss
    run profile --model gpt2 --preset small --batch 1 --seq "$seq" --granularity sublayer --loss "$loss" \
      --emulate h100-sxm:pcie5 --out "$dir/$name.profile.json" > "$dir/$name.profile.txt"
  done
  for loss in aten chunked; do
    name=xl-t$seq-$loss
    run estimate --model gpt2 --preset xl --gpu h100-80gb --dtype bf16 --batch 1 --seq "$seq" \
      --granularity sublayer --loss "$loss" --out "$dir/$name.profile.json" > /dev/null
  done
done

# Both losses on one axis: ATen's curve at 2% to 100% of its store-all peak, the
# chunked loss's at the same budgets in bytes.
percent=2%,4%,6%,8%,10%,12%,14%,16%,18%,20%,25%,30%,35%,40%,45%,50%,55%,60%,65%,70%,75%,80%,85%,90%,95%,100%
for prefix in small-t256 small-t1024 xl-t256 xl-t1024; do
  run tradeoff --profile "$dir/$prefix-aten.profile.json" --budgets "$percent" \
    --solvers optimal,recompute-only,store-all --no-plot --out "$dir/$prefix-aten" > /dev/null
  budgets=$("$python" -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['budgets_bytes'])))" \
    "$dir/$prefix-aten/tradeoff.json")
  run tradeoff --profile "$dir/$prefix-chunked.profile.json" --budgets "$budgets" \
    --solvers optimal,recompute-only,store-all --no-plot --out "$dir/$prefix-chunked" > /dev/null
done

load=$(cut -d' ' -f1-3 /proc/loadavg)
build/tests/bench/head_loss_bench --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.5 --benchmark_out="$dir/head_loss_bench.json" --benchmark_out_format=json > /dev/null
echo "build/tests/bench/head_loss_bench --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true" \
  "--benchmark_min_time=0.5 --benchmark_out=head_loss_bench.json --benchmark_out_format=json" >> "$dir/commands.txt"
"$python" tools/plot_loss_report.py "$dir" "$date" "$load"
# The spread across runs, which one run cannot show: from this report's earlier runs.
cat >> "$dir/README.md" <<'ACROSS'

## Across runs

This report is one run: its IQRs are within it, over 9 repetitions interleaved at random. Two runs of it on this project's 2-CPU testbeds: at fa68f67 ATen's head took 636 and 2429 ms (T = 256 and 1024) and the chunked head 1.211x and 1.255x as long; at 4b5918f, 479 and 1728 ms, and 1.193x and 1.218x. Absolute times of separate runs differ by about a third; the ratio measured within a run moved by 0.02 to 0.04. The floors are bytes and do not move.
ACROSS
echo "report in $dir"

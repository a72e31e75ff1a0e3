#!/usr/bin/env bash
# make_offload_report.sh: regenerates the offloading benchmark -- the tiny GPT-2 on
# this CPU, the copy engine capped at a PCIe-like 16 GB/s, and the measured
# step time of optimal, recompute-only, offload-all and store-all at 30%, 50%, 70% and
# 100% of the store-all activation peak.
#   tools/make_offload_report.sh [DATE]     (after scripts/build.sh; DATE defaults to today)
# Writes results/DATE-offload-tiny-cpu/ (README with claim, command, machine, table;
# tradeoff.json; figures; the profile and its printout).
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build/tools/memopt}
date=${1:-$(date +%F)}
dir=results/$date-offload-tiny-cpu
mkdir -p "$dir"
profile_args="profile --preset tiny --link 16GB/s --out $dir/gpt2_tiny_link16.profile.json"
"$memopt" $profile_args > "$dir/profile.txt"
"$memopt" tradeoff --profile "$dir/gpt2_tiny_link16.profile.json" --budgets 30%,50%,70%,100% \
  --solvers optimal,recompute-only,offload-all,store-all --run --steps 7 --check --out "$dir"
# Recorded as `memopt ...`, like the report's own command: never this machine's path.
printf '\n## Profile\n\nThe profile was made with:\n\n```sh\nmemopt %s\n```\n' "$profile_args" >> "$dir/README.md"
echo "report in $dir/README.md"

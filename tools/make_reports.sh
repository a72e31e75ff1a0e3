#!/usr/bin/env bash
# make_reports.sh: regenerates the trade-off and fit reports committed in results/ --
# one MEASURED report of the tiny GPT-2 on this machine (its copy link emulating an
# H100 over PCIe 5), and MODELED reports of GPT-2 small and xl on a V100-16GB (fp16)
# and an H100-80GB (bf16), each offloading over the GPU's own host link.
#   tools/make_reports.sh            (after scripts/build.sh; MEMOPT_MEASURED=0 remakes
#                                     only the modeled ones, MEMOPT_MODELED=0 only the measured)
# Each report's README names the command that made it; this script only strings
# them together and notes, in each README, how its profile was made.
set -euo pipefail
cd "$(dirname "$0")/.."
memopt=${MEMOPT:-build/tools/memopt}

note_profile() {  # README, the memopt arguments that made the profile
  # Recorded as `memopt ...`, like the reports' own commands: never this machine's path.
  printf '\n## Profile\n\nThe profile was made with:\n\n```sh\nmemopt %s\n```\n' "$2" >> "$1/README.md"
}

note_across_runs() {  # README: where the spread across fresh processes is measured
  printf '\n## Across runs\n\nThis report is one run, and its spreads are within it. Separate processes on one machine run the same schedule a few percent apart: [../predictions-fresh-processes](../predictions-fresh-processes/README.md) repeats this model'"'"'s sweep in fresh processes, run after run (`tools/fresh_runs.py`), and gives measured over predicted per schedule with its spread across the runs.\n' >> "$1/README.md"
}

if [ "${MEMOPT_MEASURED:-1}" != 0 ]; then  # MEMOPT_MEASURED=0: the modeled reports only
dir=results/tradeoff-tiny-cpu
mkdir -p "$dir"
# The copy link at an H100's PCIe 5 ratio to compute (docs/formats.md, "Where the numbers come from").
args="profile --model gpt2 --preset tiny --emulate h100-sxm:pcie5 --out $dir/gpt2_tiny.profile.json"
"$memopt" $args > "$dir/profile.txt"
"$memopt" tradeoff --profile "$dir/gpt2_tiny.profile.json" --budgets 20%:100%:5% --run --steps 5 --check --out "$dir"
note_profile "$dir" "$args"
note_across_runs "$dir"
fi

if [ "${MEMOPT_MODELED:-1}" != 0 ]; then  # MEMOPT_MODELED=0: the measured report only
for combo in "small v100-16gb fp16" "small h100-80gb bf16" "xl v100-16gb fp16" "xl h100-80gb bf16"; do
  set -- $combo
  dir=results/modeled-gpt2-$1-$2
  mkdir -p "$dir"
  args="estimate --model gpt2 --preset $1 --gpu $2 --batch 8 --seq 1024 --dtype $3 --out $dir/gpt2_$1_$2.profile.json"
  "$memopt" $args
  "$memopt" tradeoff --profile "$dir/gpt2_$1_$2.profile.json" --budgets 10%:100%:5% --out "$dir"
  note_profile "$dir" "$args"
  printf '\nHow large a batch fits on this GPU: [fit/README.md](fit/README.md).\n' >> "$dir/README.md"
  "$memopt" estimate --model gpt2 --preset "$1" --gpu "$2" --batch 8 --seq 1024 --dtype "$3" --fit-chart --out-dir "$dir/fit"
done
fi
echo "reports in results/tradeoff-tiny-cpu and results/modeled-gpt2-*"

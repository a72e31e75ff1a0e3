#!/usr/bin/env bash
# demo.sh: README command 1 -- installs what is missing, builds, and runs memopt's
# main job on the built-in default model.
#   scripts/demo.sh            (writes everything under out/demo/)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
memopt=build/tools/memopt
out=out/demo
mkdir -p "$out"
profile=tests/data/gpt2_small_example.profile.json

echo
echo "== memopt solve: bundled GPT-2 small example profile ($profile), several budgets"
for budget in 100% 60% 40% min; do
  echo
  echo "---- budget $budget"
  "$memopt" solve --profile "$profile" --budget "$budget" --out "$out/schedule_${budget%\%}.json"
done
echo
echo "schedules written to $out/"

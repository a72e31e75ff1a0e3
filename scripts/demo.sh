#!/usr/bin/env bash
# demo.sh: README command 1 -- installs what is missing, builds, and runs memopt's
# main job on the built-in default model, the tiny GPT-2:
#   profile it (copy link emulating an H100 over PCIe 5) -> solve at 100%, 60%, 40% of the store-all peak and at the minimum
#   -> train 2 warm-up + 4 measured steps along each schedule (checking gradients
#      against plain training)
#   -> print predicted and measured peak and time side by side
#   -> memopt tradeoff: every solver at 30%..100% of the store-all peak, predicted
#      and measured, written as a report with figures under out/demo/tradeoff/.
#   scripts/demo.sh            (everything is written under out/demo/)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/install_python.sh
memopt=build/tools/memopt
out=out/demo
mkdir -p "$out"
rm -f "$out/runs.jsonl"
profile=$out/gpt2_tiny.profile.json

echo
echo "== 1. memopt profile: the tiny GPT-2 on this CPU, one compute thread, the copy link at an H100's PCIe 5 ratio"
"$memopt" profile --model gpt2 --preset tiny --emulate h100-sxm:pcie5 --out "$profile"

for budget in 100% 60% 40% min; do
  schedule=$out/schedule_${budget%\%}.json
  echo
  echo "== 2. memopt solve at $budget"
  "$memopt" solve --profile "$profile" --budget "$budget" --out "$schedule"
  echo
  echo "== 3. memopt run at $budget"
  "$memopt" run --profile "$profile" --schedule "$schedule" --steps 4 --check --summary-out "$out/runs.jsonl"
done

echo
echo "== predicted (simulator) vs measured (median of 4 steps after 2 warm-up) on this machine"
.venv/bin/python - "$out/runs.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mib = 1 << 20
print(f"{'schedule':<28} {'solver':<15} {'budget':>10} {'pred peak':>10} {'meas peak':>10} {'pred ms':>9} {'meas ms':>9} {'IQR ms':>15} {'max |dgrad|':>11}")
for r in rows:
    p, m = r["predicted"], r["measured"]
    iqr = f"{m['time_q25_ms']:.2f}-{m['time_q75_ms']:.2f}"
    print(f"{r['schedule'].split('/')[-1]:<28} {r['solver']:<15} {r['budget_bytes']/mib:>8.2f}Mi "
          f"{p['peak_bytes']/mib:>8.2f}Mi {m['peak_bytes']/mib:>8.2f}Mi {p['time_ms']:>9.2f} {m['time_ms']:>9.2f} "
          f"{iqr:>15} {r.get('max_abs_grad_diff', float('nan')):>11.3g}")
PY

echo
echo "== 4. memopt tradeoff: every solver at every budget, predicted and measured"
"$memopt" tradeoff --profile "$profile" --budgets 30%:100%:10% --run --steps 3 --out "$out/tradeoff"
echo
echo "trade-off report: $out/tradeoff/README.md (figures: overhead_vs_budget, stage_map, predicted_vs_measured .png/.svg)"
echo "everything is in $out/"

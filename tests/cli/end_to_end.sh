#!/usr/bin/env bash
# end_to_end.sh: the memopt CLI from a fresh profile to training along its schedule:
# profile a small GPT-2 -> solve -> simulate -> run --check. Fails on any non-zero
# exit, on gradients that differ from plain training, or on a measured peak over budget.
#   tests/cli/end_to_end.sh path/to/memopt
set -euo pipefail
memopt=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$memopt" profile --preset tiny --batch 2 --seq 32 --dropout 0.1 --repeat 1 --out "$dir/p.json" >/dev/null
"$memopt" solve --profile "$dir/p.json" --budget 50% --out "$dir/s.json" >/dev/null
"$memopt" simulate --profile "$dir/p.json" --schedule "$dir/s.json" | grep -q "valid"
# --bandwidth none: the profile's link is ignored, so nothing is offloaded.
"$memopt" solve --profile "$dir/p.json" --budget 40% --bandwidth none --out "$dir/s_none.json" >/dev/null
if grep -q '"offload\|"prefetch' "$dir/s_none.json"; then
  echo "FAIL: --bandwidth none still offloads" >&2
  exit 1
fi
"$memopt" run --profile "$dir/p.json" --schedule "$dir/s.json" --warmup-steps 1 --steps 2 --check \
  --summary-out "$dir/runs.jsonl" > "$dir/run.txt"
cat "$dir/run.txt"
# The warm-up step and both measured steps were printed; the warm-up step, the
# checked one, with a gradient difference against plain autograd of exactly zero, and
# the measured steps unchecked.
num_steps=$(grep -cE '^ +[0-9]+ ' "$dir/run.txt" || true)
num_exact=$(grep -E '^ +[0-9]+ w ' "$dir/run.txt" | grep -c '  0 (0), loss diff 0' || true)
num_checked=$(grep -E '^ +[0-9]+ ' "$dir/run.txt" | grep -c 'loss diff' || true)
if [ "$num_steps" != 3 ] || [ "$num_exact" != 1 ] || [ "$num_checked" != 1 ]; then
  echo "FAIL: expected 3 step lines, the warm-up one alone checked and equal to plain training; got $num_steps lines, $num_checked checked, $num_exact equal" >&2
  exit 1
fi
if grep -q "exceeds the budget" "$dir/run.txt"; then
  echo "FAIL: measured peak over budget" >&2
  exit 1
fi
python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); m=r["measured"]; assert m["peak_bytes"] <= r["budget_bytes"], r; assert r["steps"] == 2 and r["warmup_steps"] == 1, r; assert m["time_q25_ms"] <= m["time_ms"] <= m["time_q75_ms"], r; assert m["reserved_peak_bytes"] >= m["peak_bytes"], r' "$dir/runs.jsonl"
# A device too small for the plan (--device-memory) is refused before any step, with
# the shortfall.
if "$memopt" run --profile "$dir/p.json" --schedule "$dir/s.json" --steps 1 --device-memory 4MiB \
     >/dev/null 2>"$dir/oom.txt"; then
  echo "FAIL: a plan larger than the device was run" >&2
  exit 1
fi
grep -q "s.json: a training step of this plan needs .* short by" "$dir/oom.txt" || { cat "$dir/oom.txt"; exit 1; }
# --device cuda names the fix when it cannot run: a CPU-only build, or no GPU visible.
if "$memopt" profile --device cuda --preset tiny --repeat 1 > "$dir/cuda.txt" 2>&1; then
  echo "note: --device cuda ran (a GPU is visible)"
elif ! grep -Eq "built without the CUDA backend|no CUDA device is visible" "$dir/cuda.txt"; then
  echo "FAIL: --device cuda failed without naming the fix:" >&2
  cat "$dir/cuda.txt" >&2
  exit 1
fi
# So does `run --device cuda`; and a CPU profile's run says it trains on the CPU, with
# its predictions from stage times re-measured in its own process unless told not to.
grep -q "on cpu (" "$dir/run.txt" || { echo "FAIL: memopt run does not say it trains on the cpu" >&2; exit 1; }
grep -q "stage times from this process" "$dir/run.txt" || { echo "FAIL: run did not re-time its stages" >&2; exit 1; }
# ... and predicts again from stage times taken in its measured rounds (docs/measurement.md).
grep -q "predicted from stage times taken in the measured rounds" "$dir/run.txt" ||
  { echo "FAIL: run did not predict from the measured rounds' stage times" >&2; exit 1; }
python3 -c 'import json,sys; l=json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert l["predicted_in_rounds_ms"] > 0, l' \
  "$dir/runs.jsonl"
"$memopt" run --profile "$dir/p.json" --schedule "$dir/s.json" --warmup-steps 0 --steps 1 --profile-times \
  > "$dir/run_profile_times.txt"
grep -q "stage times from the profile" "$dir/run_profile_times.txt" ||
  { echo "FAIL: --profile-times did not keep the profile's times" >&2; exit 1; }
# tradeoff --run plans and predicts from this process's stage times, and its report says so.
"$memopt" tradeoff --profile "$dir/p.json" --budgets 50%,100% --solvers optimal,store-all --run --steps 1 \
  --warmup-steps 0 --no-plot --out "$dir/t" > /dev/null 2>&1
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["predicted_times"] == "this process", t["predicted_times"]; assert all(p["measured"]["predicted_in_rounds_ms"] > 0 for p in t["points"] if "measured" in p), t' \
  "$dir/t/tradeoff.json"
grep -q "stage times re-measured in the measuring process" "$dir/t/README.md" ||
  { echo "FAIL: the tradeoff report does not say where its predictions' times come from" >&2; exit 1; }
if "$memopt" run --device cuda --profile "$dir/p.json" --schedule "$dir/s.json" --steps 1 > "$dir/cuda_run.txt" 2>&1; then
  echo "note: run --device cuda ran (a GPU is visible)"
elif ! grep -Eq "built without the CUDA backend|no CUDA device is visible" "$dir/cuda_run.txt"; then
  echo "FAIL: run --device cuda failed without naming the fix:" >&2
  cat "$dir/cuda_run.txt" >&2
  exit 1
fi
"$memopt" profile --preset tiny --batch 2 --seq 32 --repeat 1 --trace-out "$dir/trace.json" >/dev/null
# A model whose dimensions differ from its preset's is not titled with the preset.
"$memopt" profile --preset tiny --n-layer 2 --batch 2 --seq 32 --repeat 1 --out "$dir/p2.json" > "$dir/p2.txt"
if head -1 "$dir/p2.txt" | grep -q "tiny" || grep -q '"preset"' "$dir/p2.json"; then
  echo "FAIL: a 2-layer model is called the tiny preset:" >&2
  head -1 "$dir/p2.txt" >&2
  exit 1
fi
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert any(r["label"].startswith("memopt/bwd/") for r in t["ranges"]), t' \
  "$dir/trace.json"
echo "end to end: ok"

#!/usr/bin/env bash
# planning.sh: the planning half of the memopt CLI, which needs no LibTorch, on the
# bundled example profile and on a modeled one: solve -> simulate, estimate --out ->
# solve -> simulate, plan (ZeRO and pipeline), tradeoff --no-plot. Checks what the
# files hold, not only exit codes: schedules parse and fit their budgets, simulate
# agrees to the byte, the modeled profile reads back, and each report records the
# command as it was typed. In a build without LibTorch, `tradeoff --run` and the
# commands it leaves out fail with one line naming the fix.
#   tests/cli/planning.sh /abs/path/to/memopt tests/data/gpt2_small_example.profile.json ON|OFF   (MEMOPT_TORCH)
set -euo pipefail
memopt=$(realpath "$1")
example=$2
torch=$3
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# Relative paths, as a user types them, and a space in every one but the profile's:
# quoting is part of the test.
cp "$example" "$root/example.profile.json"
cd "$root"
example=example.profile.json
dir="with space"
mkdir "$dir"
fail() { echo "FAIL: $*" >&2; exit 1; }

# json FILE EXPR: a Python expression over the file's JSON `j` (and `sys`).
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# solve -> a schedule that parses, is for this chain, fits its budget, and simulate
# reports the same peak to the byte.
"$memopt" solve --profile "$example" --budget 50% --out "$dir/s.json" > "$dir/solve.txt"
[ "$(json "$dir/s.json" 'j["format"]')" = memopt.schedule ] || fail "solve wrote no schedule"
[ "$(json "$dir/s.json" 'j["chain_length"]')" = "$(json "$example" 'len(j["stages"])')" ] || fail "chain_length"
[ "$(json "$dir/s.json" 'j["predicted"]["peak_bytes"] <= j["budget_bytes"]')" = True ] || fail "schedule over budget"
grep -q '^\* optimal .* yes ' "$dir/solve.txt" || { cat "$dir/solve.txt"; fail "no comparison row for optimal"; }
"$memopt" simulate --profile "$example" --schedule "$dir/s.json" > "$dir/sim.txt"
sim_peak=$(sed -n 's/^  peak .*(\([0-9]*\) B), budget .*: fits$/\1/p' "$dir/sim.txt")
[ "$sim_peak" = "$(json "$dir/s.json" 'j["predicted"]["peak_bytes"]')" ] || { cat "$dir/sim.txt"; fail "simulate's peak"; }
echo "ok   solve + simulate: peak $sim_peak B within $(json "$dir/s.json" 'j["budget_bytes"]') B"

# estimate --out -> a modeled profile that reads back (solve, simulate), is marked
# modeled, and records the command as typed: memopt, then the arguments, quoted.
"$memopt" estimate --preset small --gpu v100-16gb --dtype fp16 --batch 2 --seq 256 --out "$dir/e.json" > /dev/null
[ "$(json "$dir/e.json" 'j["measured"]')" = False ] || fail "estimate's profile is not marked modeled"
expected="memopt estimate --preset small --gpu v100-16gb --dtype fp16 --batch 2 --seq 256 --out '$dir/e.json'"
[ "$(json "$dir/e.json" 'j["command"]')" = "$expected" ] || fail "estimate recorded: $(json "$dir/e.json" 'j["command"]')"
[ "$(json "$dir/e.json" 'j["model"]["seq_len"], j["model"]["batch"]')" = "(256, 2)" ] || fail "estimate's workload"
"$memopt" solve --profile "$dir/e.json" --budget 60% --out "$dir/es.json" > /dev/null
"$memopt" simulate --profile "$dir/e.json" --schedule "$dir/es.json" | grep -q ": fits$" || fail "modeled schedule"
echo "ok   estimate -> solve -> simulate, command recorded as typed"

# plan: ZeRO-3 on 2 ranks, one schedule; 2 pipeline stages, one schedule each that
# together cover the chain.
"$memopt" plan --profile "$dir/e.json" --gpu-memory 16GiB --world-size 2 --zero-stage 3 --out "$dir/z.json" \
  > "$dir/plan.txt"
grep -q "^layout   2 rank(s) = 2 data-parallel x 1 pipeline stage(s); ZeRO-3" "$dir/plan.txt" || fail "plan layout"
[ "$(json "$dir/z.json" 'j["predicted"]["peak_bytes"] <= j["budget_bytes"]')" = True ] || fail "plan's schedule"
"$memopt" plan --profile "$dir/e.json" --gpu-memory 16GiB --world-size 2 --pipeline-stages 2 --micro-batches 2 \
  --out "$dir/p.json" > /dev/null
lengths=$(( $(json "$dir/p.stage0.json" 'j["chain_length"]') + $(json "$dir/p.stage1.json" 'j["chain_length"]') ))
[ "$lengths" = "$(json "$dir/e.json" 'len(j["stages"])')" ] || fail "pipeline stages cover $lengths stages"
echo "ok   plan: ZeRO-3 and a 2-stage pipeline"

# tradeoff --no-plot: a report whose points are the solvers' at each budget, and whose
# README and JSON carry the command as typed.
"$memopt" tradeoff --profile "$example" --budgets 40%,100% --solvers optimal,store-all --no-plot \
  --out "$dir/report" > /dev/null 2>&1
expected="memopt tradeoff --profile $example --budgets 40%,100% --solvers optimal,store-all --no-plot --out '$dir/report'"
[ "$(json "$dir/report/tradeoff.json" 'j["command"]')" = "$expected" ] || fail "tradeoff recorded the wrong command"
grep -qxF "$expected" "$dir/report/README.md" || fail "README lacks the command"
[ "$(json "$dir/report/tradeoff.json" 'sorted((p["solver"], p["status"]) for p in j["points"])')" = \
  "[('optimal', 'ok'), ('optimal', 'ok'), ('store-all', 'infeasible'), ('store-all', 'ok')]" ] || fail "tradeoff points"
echo "ok   tradeoff report"

# expect_error NAME NEEDLE -- memopt args: a non-zero exit, and on stderr only one error
# line, holding NEEDLE (refused before any work).
expect_error() {
  local name=$1 needle=$2; shift 3
  local rc=0
  "$memopt" "$@" > /dev/null 2> "$dir/err.txt" || rc=$?
  [ "$rc" != 0 ] || fail "$name: exit 0"
  [ "$(grep -c '^memopt: error:' "$dir/err.txt")" = 1 ] || { cat "$dir/err.txt"; fail "$name: not one error line"; }
  grep -qF -- "$needle" "$dir/err.txt" || { cat "$dir/err.txt"; fail "$name: lacks '$needle'"; }
  [ "$(wc -l < "$dir/err.txt")" = 1 ] || { cat "$dir/err.txt"; fail "$name: more than the error on stderr"; }
  echo "ok   $name: $(cat "$dir/err.txt")"
}
if [ "$torch" = OFF ]; then
  expect_error tradeoff_run "--run: this memopt was built without LibTorch (MEMOPT_TORCH=OFF); rebuild with" -- \
    tradeoff --profile "$example" --budgets 50% --run --out "$dir/run"
  [ ! -e "$dir/run" ] || fail "tradeoff --run wrote a report"
  for command in profile run train; do
    expect_error "$command" "$command: this memopt was built without LibTorch; rebuild with MEMOPT_TORCH=ON" -- \
      "$command" --preset tiny --out "$dir/x.json"
  done
fi
echo "planning: ok"

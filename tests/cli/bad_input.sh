#!/usr/bin/env bash
# bad_input.sh: every class of bad input the memopt CLI can be given gets one
# clear message -- the file, the field, op index or flag, and the fix -- and a non-zero
# exit, never a crash, a hang or a partial file. Drives the real binary.
#   tests/cli/bad_input.sh path/to/memopt
set -uo pipefail
memopt=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

# A small valid profile (3 stages, with a link so offload ops are allowed) that each
# case below breaks in exactly one way.
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
stage = lambda n: {"name": n, "fwd_ms": 1.0, "bwd_ms": 2.0, "out_bytes": 1000, "saved_bytes": 3000,
                   "fwd_tmp_bytes": 100, "bwd_tmp_bytes": 200}
p = {"format": "memopt.profile", "version": 1, "input_bytes": 1000,
     "link": {"d2h_bytes_per_s": 1e9, "h2d_bytes_per_s": 1e9},
     "loss": {"bwd_ms": 0.5, "bwd_tmp_bytes": 0}, "stages": [stage("s0"), stage("s1"), stage("s2")]}
json.dump(p, open(f"{d}/good.json", "w"))
def variant(name, edit):
    q = json.loads(json.dumps(p)); edit(q); json.dump(q, open(f"{d}/{name}.json", "w"))
variant("format", lambda q: q.update(format="memopt.schedule"))
variant("version", lambda q: q.update(version=7))
variant("missing", lambda q: q["stages"][1].pop("out_bytes"))
variant("typed", lambda q: q["stages"][2].update(fwd_ms="fast"))
variant("negative", lambda q: q["stages"][1].update(fwd_tmp_bytes=-5))
variant("below_gradient", lambda q: q["stages"][1].update(bwd_tmp_bytes=-1001))
variant("saved", lambda q: q["stages"][0].update(saved_bytes=10))
variant("empty", lambda q: q.update(stages=[]))
variant("huge", lambda q: q.update(stages=[stage(f"s{i}") for i in range(10000)]))
variant("long400", lambda q: q.update(stages=[stage(f"s{i}") for i in range(400)]))
# JSON has no NaN or infinity, but Python's json.dump writes them (NaN, Infinity), and
# 1e999 overflows a double.
good = open(f"{d}/good.json").read()
open(f"{d}/nan.json", "w").write(good.replace('"fwd_ms": 1.0', '"fwd_ms": NaN', 1))
open(f"{d}/overflow.json", "w").write(good.replace('"fwd_ms": 1.0', '"fwd_ms": 1e999', 1))
open(f"{d}/malformed.json", "w").write(open(f"{d}/good.json").read()[:-40])
sched = lambda ops, L=3: {"format": "memopt.schedule", "version": 1, "budget_bytes": 10**9, "chain_length": L,
                          "ops": ops}
good_ops = [["fwd_keep", 0], ["fwd_keep", 1], ["fwd_keep", 2], ["loss"], ["bwd", 2], ["bwd", 1], ["bwd", 0]]
schedules = {
    "s_range": sched([["fwd_keep", 0], ["fwd_keep", 5], ["loss"]]),
    "s_bwd_early": sched(good_ops[:3] + [["bwd", 2], ["loss"]] + good_ops[5:]),
    "s_dropped": sched([["fwd_ckpt", 0], ["fwd_drop", 1], ["fwd_keep", 1]] + good_ops[2:]),
    "s_offload": sched([["fwd_keep", 0], ["offload", 2]] + good_ops[1:]),
    "s_length": sched(good_ops, L=4),
    "s_format": p,
}
for name, s in schedules.items():
    json.dump(s, open(f"{d}/{name}.json", "w"))
PY

# expect_error NAME "needle 1" "needle 2" ... -- memopt args...
# Passes when memopt exits non-zero, writes exactly one "memopt: error:" line on
# stderr, and that line contains every needle.
expect_error() {
  local name=$1; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  local rc=0
  timeout 60 "$memopt" "$@" >"$dir/out.txt" 2>"$dir/err.txt" || rc=$?
  local msg; msg=$(grep '^memopt: error:' "$dir/err.txt")
  local ok=1
  if [ "$rc" = 0 ]; then echo "FAIL $name: exit 0"; ok=0; fi
  if [ "$rc" -ge 124 ]; then echo "FAIL $name: exit $rc (timeout or crash)"; ok=0; fi
  if [ "$(grep -c '^memopt: error:' "$dir/err.txt")" != 1 ]; then echo "FAIL $name: not one error line"; ok=0; fi
  for n in "${needles[@]}"; do
    if ! grep -qF -- "$n" <<<"$msg"; then echo "FAIL $name: message lacks '$n'"; ok=0; fi
  done
  if [ $ok = 1 ]; then echo "ok   $name: $msg"; else cat "$dir/err.txt"; failures=$((failures + 1)); fi
}

P=$dir/good.json
solve() { echo solve --profile "$1" --budget "${2:-100%}" --out "$dir/s.json"; }

# Profiles: each names the file, the JSON path and a fix (regenerate with memopt profile).
expect_error malformed_json "$dir/malformed.json" "not valid JSON" "memopt profile" -- $(solve "$dir/malformed.json")
expect_error wrong_format "$dir/format.json" "/format" "not a memopt profile" -- $(solve "$dir/format.json")
expect_error wrong_version "$dir/version.json" "/version" "7" "memopt profile" -- $(solve "$dir/version.json")
expect_error missing_field "$dir/missing.json" "/stages/1/out_bytes" "missing" "memopt profile" -- $(solve "$dir/missing.json")
expect_error wrong_type "$dir/typed.json" "/stages/2/fwd_ms" "expected a number" -- $(solve "$dir/typed.json")
expect_error negative "$dir/negative.json" "/stages/1/fwd_tmp_bytes" "negative" -- $(solve "$dir/negative.json")
expect_error below_gradient "$dir/below_gradient.json" "/stages/1/bwd_tmp_bytes" "below -1000" -- $(solve "$dir/below_gradient.json")
expect_error nan "$dir/nan.json" "line 1" "NaN" "not measured" "memopt profile" -- $(solve "$dir/nan.json")
expect_error overflow "$dir/overflow.json" "1e999" "memopt profile" -- $(solve "$dir/overflow.json")
expect_error saved_below_out "$dir/saved.json" "/stages/0/saved_bytes" "less than out_bytes" -- $(solve "$dir/saved.json")
expect_error empty_chain "$dir/empty.json" "/stages" "no stages" -- $(solve "$dir/empty.json")
expect_error missing_file "$dir/nope.json" "cannot open" "memopt profile" -- $(solve "$dir/nope.json")
# 10,000 stages: refused at once with the limit and the fix, not a DP that runs for days.
expect_error too_many_stages "$dir/huge.json" "/stages" "10000 stages" "512" "merge" -- $(solve "$dir/huge.json")
# The profile has a link, so `optimal` runs the offload DP, whose states set the limit:
# 4 GiB / (24 B x sum_{e=0}^{400} (e + 5) states per slot) - 1 = 2175.
expect_error too_many_slots "--slots 100000" "400 stages" "use 2175 slots or fewer" -- $(solve "$dir/long400.json") --slots 100000

# Budgets and other flags.
expect_error budget_unit "--budget" "unknown unit 'XB'" "GiB" -- $(solve "$P" 4XB)
expect_error budget_negative "--budget" "negative" -- $(solve "$P" -5GiB)
expect_error budget_percent "--budget" "out of range" -- $(solve "$P" 0%)
expect_error budget_below_min "smallest budget that works" "--budget min" -- $(solve "$P" 1KiB)
expect_error bandwidth_unit "--bandwidth" "unknown unit" -- $(solve "$P") --bandwidth 3parsecs
expect_error unknown_solver "--solver" "optimal" -- $(solve "$P") --solver fastest
# --emulate needs a measured GPT-2 profile (its FLOPs) and known words; with
# --bandwidth too it refuses both.
expect_error emulate_gpu "--emulate" "unknown GPU 'tpu'" "known GPUs" -- $(solve "$P") --emulate tpu:pcie5
expect_error emulate_both "--emulate and --bandwidth" -- $(solve "$P") --emulate h100 --bandwidth 1GB/s
expect_error emulate_model "--emulate" "needs a GPT-2 profile" -- $(solve "$P") --emulate h100
# The GPT-2 a modeled profile is of: each bad choice names its flag.
est() { echo estimate --gpu v100-16gb --out "$dir/e.json"; }
expect_error estimate_model "--model: 'llama' is not supported; use gpt2" -- $(est) --model llama
expect_error estimate_preset "--preset: unknown preset 'huge'" "tiny, small, medium, large, xl" -- $(est) --preset huge
expect_error estimate_granularity "--granularity: 'layer' is not block, sublayer or op" -- $(est) --granularity layer
expect_error estimate_attention "--attention: 'flash' is not explicit or sdpa" -- $(est) --attention flash
expect_error estimate_batch "batch must be positive, got 0" -- $(est) --batch 0
expect_error estimate_dropout "dropout" "outside [0, 1)" -- $(est) --dropout 1.5
expect_error estimate_gpu "--gpu: unknown GPU 'tpu'" "h100-80gb" -- estimate --gpu tpu --out "$dir/e.json"
expect_error out_dir_missing "$dir/no/such/s.json" "directory exists" -- solve --profile "$P" --budget 100% --out "$dir/no/such/s.json"

# Flags the parser itself refuses read like every other error, naming the command's help.
expect_error unknown_flag "--fastest" "memopt solve --help" -- $(solve "$P") --fastest
expect_error missing_required "--profile" "required" "memopt solve --help" -- solve --budget 50%
expect_error not_a_number "--slots" "memopt solve --help" -- $(solve "$P") --slots many
expect_error no_command "memopt --help" --

# Schedules: the file, /ops/<index> (or /chain_length) and the fix.
sim() { echo simulate --profile "$P" --schedule "$dir/$1.json"; }
expect_error op_out_of_range "$dir/s_range.json" "/ops/1/1" "stage 5 does not exist" "memopt solve" -- $(sim s_range)
expect_error bwd_before_loss "$dir/s_bwd_early.json" "/ops/3" "run loss first" "memopt solve" -- $(sim s_bwd_early)
expect_error used_after_drop "$dir/s_dropped.json" "/ops/2" "a_1" "not resident" "memopt solve" -- $(sim s_dropped)
expect_error offload_not_resident "$dir/s_offload.json" "/ops/1" "a_2 is not resident" "memopt solve" -- $(sim s_offload)
expect_error chain_length_differs "$dir/s_length.json" "/chain_length" "4 stages" "has 3" "memopt solve" -- $(sim s_length)
expect_error profile_as_schedule "$dir/s_format.json" "/format" "not a memopt schedule" -- $(sim s_format)

# A valid profile and schedule still pass, so the cases above fail for their one flaw.
if "$memopt" solve --profile "$P" --budget 100% --out "$dir/ok.json" >/dev/null 2>&1 &&
   "$memopt" simulate --profile "$P" --schedule "$dir/ok.json" >/dev/null 2>&1; then
  echo "ok   valid input accepted"
else
  echo "FAIL valid input refused"; failures=$((failures + 1))
fi

# An interrupted write leaves the old file: the kernel kills memopt (SIGXFSZ) once the
# new schedule passes 1 KiB, half way through writing it.
cp "$dir/ok.json" "$dir/keep.json"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
stage = lambda n: {"name": n, "fwd_ms": 1.0, "bwd_ms": 2.0, "out_bytes": 1000, "saved_bytes": 3000,
                   "fwd_tmp_bytes": 100, "bwd_tmp_bytes": 200}
p = json.load(open(f"{d}/good.json")); p["stages"] = [stage(f"s{i}") for i in range(60)]
json.dump(p, open(f"{d}/long.json", "w"))
PY
rc=0
(ulimit -f 1; exec "$memopt" solve --profile "$dir/long.json" --budget 100% --out "$dir/keep.json" >/dev/null 2>&1) || rc=$?
if [ "$rc" != 0 ] && cmp -s "$dir/ok.json" "$dir/keep.json" && ls "$dir"/keep.json.tmp.* >/dev/null 2>&1; then
  echo "ok   killed mid-write (exit $rc): the old schedule is intact, the partial temporary is aside"
else
  echo "FAIL interrupted write: exit $rc, old file intact: $(cmp -s "$dir/ok.json" "$dir/keep.json" && echo yes || echo no)"
  failures=$((failures + 1))
fi
# The next write replaces the file and clears the dead writer's temporary.
if "$memopt" solve --profile "$dir/long.json" --budget 100% --out "$dir/keep.json" >/dev/null 2>&1 &&
   ! ls "$dir"/keep.json.tmp.* >/dev/null 2>&1 && "$memopt" simulate --profile "$dir/long.json" --schedule "$dir/keep.json" >/dev/null; then
  echo "ok   the next write succeeds and removes the stale temporary"
else
  echo "FAIL rewrite after an interrupted write"; ls "$dir"; failures=$((failures + 1))
fi

if [ "$failures" = 0 ]; then echo "bad input: ok"; else echo "bad input: $failures failure(s)"; exit 1; fi

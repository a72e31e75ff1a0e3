"""The copy-placement MILP (tools/copy_placement_milp.py) against memopt's timeline
simulator, and `optimal` against the MILP.

 - The MILP's model of time and memory is the simulator's: random placements of
   copies and waits around a plan's compute ops, fixed in the MILP, take the time the
   simulator gives, fit a budget equal to the simulated peak and do not fit one byte
   less.
 - Every placement the MILP returns is valid, fits and takes the MILP's time in the
   simulator.
 - No placement of copies and waits without moves of a kept stage's input, around the
   compute ops of `optimal`'s plan or of the plans memopt makes at larger budgets, is
   faster than `optimal`'s plan.
"""
import pathlib
import random
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import copy_placement_milp as cpm  # noqa: E402
import memopt  # noqa: E402

from check_copy_placement import (best_placement, budget_range, compute_sequences, plan_at,  # noqa: E402
                                  random_integer_profile, schedule_with)

TIME_LIMIT_S = 120


def random_placement(rng: random.Random, chain: cpm.Chain, compute):
    """Random round trips and waits around `compute`, at most one copy per link in each
    phase of a gap, so that the order on a link is the issue order the MILP also takes."""
    _, moves = cpm.walk(chain, compute)
    rng.shuffle(moves)
    taken, used = set(), set()
    at = {}  # position -> list of copy ops
    waits = set()
    for mv in moves:
        if mv.tensor in taken or rng.random() < 0.4:
            continue
        lo, hi = 2 * mv.lo_gap, 2 * mv.hi_gap + 1
        p_off = rng.randint(lo, hi)
        p_pre = rng.randint(p_off, hi)
        if ("d2h", p_off) in used or ("h2d", p_pre) in used:
            continue
        used.update({("d2h", p_off), ("h2d", p_pre)})
        taken.add(mv.tensor)
        kind, k = mv.tensor
        at.setdefault(p_off, []).append((cpm.MOVE_WORDS[kind][0], k))
        at.setdefault(p_pre, []).append((cpm.MOVE_WORDS[kind][1], k))
        waits.update(p // 2 for p in (p_off, p_pre) if p % 2)
    waits.update(g for g in range(len(compute)) if rng.random() < 0.15)
    ops = []
    for g, op in enumerate(compute):
        for phase in (0, 1):
            if phase == 1 and g in waits:
                ops.append(("wait_offloads", -1))
            copies = at.get(2 * g + phase, [])
            ops += [c for c in copies if c[0].startswith("offload")] + [c for c in copies if c[0].startswith("prefetch")]
        ops.append(op)
    return ops


def fixed_solve(chain, ops, budget):
    built = cpm.build(chain, cpm.compute_ops_of(ops), budget)
    assert cpm.placement_of(built, ops) is not None, ops
    status, _, time_ms = cpm.time_placement(built, ops, TIME_LIMIT_S)
    return status, time_ms


def test_the_milp_times_and_measures_placements_as_the_simulator_does():
    rng = random.Random(11)
    checked = fits_checked = 0
    for trial in range(40):
        profile = random_integer_profile(rng, rng.randint(2, 6))
        chain = cpm.chain_from_profile(profile)
        low, high = budget_range(profile)
        solver = rng.choice(["optimal", "recompute-only", "store-all"])
        plan = plan_at(profile, rng.randint(low, high), solver)
        compute = cpm.compute_ops_of(cpm.parse_ops(plan))
        for _ in range(3):
            ops = random_placement(rng, chain, compute)
            sim = memopt.simulate(profile, schedule_with(profile, ops, high))  # raises if invalid
            peak = sim["peak_bytes"]
            status, time_ms = fixed_solve(chain, ops, peak)
            assert time_ms == pytest.approx(sim["time_ms"], abs=1e-5), (trial, ops, status)
            checked += 1
            if peak > 0:
                status, time_ms = fixed_solve(chain, ops, peak - 1)
                assert time_ms is None, (trial, ops, "fits one byte under the simulated peak", status)
                fits_checked += 1
    print(f"{checked} placements timed, {fits_checked} checked one byte under their peak")
    assert checked >= 100 and fits_checked >= 100


def test_optimal_against_every_placement_around_memopts_compute_ops():
    """Random chains of 3 to 7 stages, a random budget each (docs/formats.md,
    "The placement check"), against every placement without moves of a kept stage's input (the space
    the exhaustive oracle covers on shorter chains; `optimal`'s own plan may move kept
    inputs, and is then held to every placement that does not). Prints every point
    where a placement beats `optimal`."""
    rng = random.Random(5)
    points, misses, with_inputs = 0, [], 0
    for length in range(3, 8):
        for _ in range(8):
            profile = random_integer_profile(rng, length)
            low, high = budget_range(profile)
            budget = rng.randint(low, high)
            # One slot per byte, as in the oracle's tests: the DPs round nothing up.
            plan = memopt.solve(profile, str(budget), "optimal", slots=budget)
            optimal_ms = memopt.simulate(profile, plan)["time_ms"]
            moves_inputs = any(op[0] == "offload_input" for op in plan["ops"])
            with_inputs += moves_inputs
            points += 1
            sequences = compute_sequences(profile, plan, larger=True, byte_slots=True)
            best, proven = best_placement(profile, budget, sequences, TIME_LIMIT_S, kept_inputs=False)
            assert proven
            # Around optimal's own compute ops a placement exists unless optimal moves
            # a kept input (its copies are then outside the space); every placement the
            # MILP returns is valid in the simulator, fits, and takes the MILP's time.
            if not moves_inputs:
                assert best is not None and best["fits"], best
            if best is None:
                continue
            assert best["fits"], best
            assert best["sim_ms"] == pytest.approx(best["ms"], abs=1e-5)
            assert best["bound_ms"] == pytest.approx(best["ms"], abs=1e-5)
            if best["ms"] < optimal_ms - 1e-5:
                misses.append((length, budget, optimal_ms, best["ms"], best["source"]))
    print(f"{points} points ({with_inputs} where optimal moves a kept stage's input); "
          f"a placement beats optimal at {len(misses)}:")
    for length, budget, optimal_ms, best_ms, source in misses:
        print(f"  L={length} budget {budget} B: optimal {optimal_ms} ms, around {source}'s compute ops {best_ms:.3f} ms")
    assert points == 40 and with_inputs >= 5
    assert not misses

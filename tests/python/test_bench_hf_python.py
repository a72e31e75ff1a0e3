"""The Python benchmark (tools/bench_hf_python.py) on a tiny GPT-2: a variant whose
profile, optimize() or step fails is recorded with its error and the others are
measured as planned (Note [A variant that fails]); the record is complete, every
measured variant with as many steps as the rounds; a budget named twice is one plan; the
record says how long each phase took and how many graphs Dynamo made in it (Note [Where a
run's time went])."""
import json
import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
pytest.importorskip("transformers")
import bench_hf_python as bench  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py

ARGS = ["--layers", "1", "--embd", "32", "--heads", "2", "--vocab", "64", "--batch", "1", "--seq", "16",
        "--links", "1GB/s", "--budgets", "", "--memopt-chunked-loss", "--warmup", "1", "--steps", "2"]


def run(tmp_path, monkeypatch, args=ARGS):
    out = tmp_path / "bench.json"
    monkeypatch.setattr(sys, "argv", ["bench_hf_python.py", *args, "--out", str(out)])
    bench.main()
    return json.loads(out.read_text())


def test_a_variant_that_fails_is_recorded_and_the_others_are_measured(tmp_path, monkeypatch):
    profile, optimize, step = bench.memopt.profile, bench.memopt.optimize, bench.step
    calls, profiled, optimized = [], [], []

    def failing_profile(model, *args, **kwargs):
        profiled.append(bool(kwargs.get("chunked_loss")))
        if kwargs.get("chunked_loss"):
            raise RuntimeError("made to fail")
        return profile(model, *args, **kwargs)

    def failing_optimize(model, *args, **kwargs):
        optimized.append(kwargs.get("link"))
        assert kwargs["profile"] is not None  # the kind's profile, never made again
        if kwargs.get("link") == "1GB/s":
            raise RuntimeError("made to fail")
        return optimize(model, *args, **kwargs)

    def failing_step(*args, **kwargs):
        # hf-ckpt's two steps for its peak, then the rounds: plain, hf-ckpt, memopt.
        # The second round's memopt fails.
        calls.append(None)
        if len(calls) == 2 + 3 + 3:
            raise RuntimeError("a step made to fail")
        return step(*args, **kwargs)

    monkeypatch.setattr(bench.memopt, "profile", failing_profile)
    monkeypatch.setattr(bench.memopt, "optimize", failing_optimize)
    monkeypatch.setattr(bench, "step", failing_step)
    d = run(tmp_path, monkeypatch)
    assert d["complete"] and d["rounds"] == 2
    assert list(d["variants"]) == ["plain", "hf-ckpt"]
    for v in d["variants"].values():
        assert len(v["time_ms"]["values"]) == 2
    # One profile per kind; the kind whose profile failed has no variant tried.
    assert profiled == [False, True]
    assert optimized == [None, "1GB/s"]
    assert d["plans"]["memopt-chunked"]["failed"] == d["plans"]["memopt-chunked+1GB/s"]["failed"] == \
        "not tried: memopt-chunked's profile failed: RuntimeError: made to fail"
    assert d["plans"]["memopt+1GB/s"]["failed"] == "RuntimeError: made to fail"
    assert d["plans"]["memopt"]["failed"] == "round 2: RuntimeError: a step made to fail"
    assert "predicted" in d["plans"]["memopt"]


def test_a_budget_named_twice_is_one_plan_and_each_phase_is_timed(tmp_path, monkeypatch):
    optimize, budgets = bench.memopt.optimize, []

    def counting_optimize(model, *args, **kwargs):
        budgets.append((kwargs.get("chunked_loss", False), kwargs["budget"], kwargs.get("link")))
        return optimize(model, *args, **kwargs)

    monkeypatch.setattr(bench.memopt, "optimize", counting_optimize)
    args = list(ARGS)
    args[args.index("--budgets") + 1] = "100%,100%"
    began = time.perf_counter()
    d = run(tmp_path, monkeypatch, args)
    wall_s = time.perf_counter() - began
    # Per kind: hf-ckpt's peak without and with the link, then 100% once.
    for chunked in (False, True):
        assert [b[1:] for b in budgets if b[0] == chunked] == [(str(d["hf_ckpt_peak_bytes"]), None),
                                                               (str(d["hf_ckpt_peak_bytes"]), "1GB/s"),
                                                               ("100%", None)]
    assert list(d["variants"]) == ["plain", "hf-ckpt", "memopt", "memopt+1GB/s", "memopt @100%",
                                   "memopt-chunked", "memopt-chunked+1GB/s", "memopt-chunked @100%"]
    assert list(d["seconds"]) == ["competitors", "profile memopt", "plans memopt", "profile memopt-chunked",
                                  "plans memopt-chunked", "warm-up rounds", "measured rounds"]
    assert all(s >= 0 for s in d["seconds"].values())
    assert sum(d["seconds"].values()) <= wall_s + 0.1 * len(d["seconds"])  # each rounded to 0.1 s


def test_a_compiled_kind_traces_its_stages_in_its_profile_alone(tmp_path, monkeypatch):
    """Its plans and their rounds run the graphs the profile traced (Note [One code
    object per stage of a model] in python/memopt/_compile.py)."""
    # This model's compiled stages need more than hf-ckpt's peak: a plan at 100% too.
    args = [a for a in ARGS if a != "--memopt-chunked-loss"] + ["--memopt-compiled"]
    args[args.index("--budgets") + 1] = "100%"
    d = run(tmp_path, monkeypatch, args)
    assert list(d["graphs"]) == list(d["seconds"])
    assert d["graphs"]["profile memopt-compiled"] > 0
    assert {k: v for k, v in d["graphs"].items() if k != "profile memopt-compiled"} == \
        {k: 0 for k in d["graphs"] if k != "profile memopt-compiled"}
    assert "memopt-compiled @100%" in d["variants"]

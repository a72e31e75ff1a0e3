"""memopt.optimize on an nn.Sequential against plain training, and memopt.profile /
solve / simulate against the memopt command line on the same JSON files."""
import copy
import json
import os
import subprocess

import pytest
import torch
from torch import nn

import memopt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("MEMOPT_CLI", os.path.join(ROOT, "build", "tools", "memopt"))


def mlp(seed=0):
    torch.manual_seed(seed)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(48, 48), nn.GELU(), nn.Dropout(0.2)]
    return nn.Sequential(*layers)


@pytest.mark.parametrize("budget", ["100%", "50%", "min"])
def test_sequential_trains_as_plain_autograd_bit_for_bit(budget):
    plain = mlp()
    seq = copy.deepcopy(plain)
    x = torch.randn(16, 48)
    net = memopt.optimize(seq, x, budget=budget, repeat=1)
    assert isinstance(net, memopt.OptimizedSequential)
    opt_plain = torch.optim.SGD(plain.parameters(), lr=0.1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for seed in (1, 2, 3):  # three steps: parameters move, and must move alike
        for model, optimizer in ((plain, opt_plain), (net, opt)):
            optimizer.zero_grad()
            torch.manual_seed(seed)
            loss = model(x).square().mean()
            loss.backward()
            optimizer.step()
        for p, q in zip(plain.parameters(), net.seq.parameters()):
            assert torch.equal(p, q)
    with torch.no_grad():
        assert torch.equal(net.eval()(x), plain.eval()(x))


def test_a_stage_returning_a_tuple_is_refused_by_name():
    class Pair(nn.Module):
        def forward(self, x):
            return x, x

    with pytest.raises(TypeError, match=r"stage 1 \(1: Pair\) returned tuple"):
        memopt.optimize(nn.Sequential(nn.Linear(4, 4), Pair()), torch.randn(2, 4), repeat=1)


def test_emulated_links_need_gpt2_and_bandwidths_do_not():
    seq, x = mlp(), torch.randn(16, 48)
    with pytest.raises(ValueError, match="needs a GPT-2 profile to count its FLOPs .* give the link as a bandwidth"):
        memopt.optimize(seq, x, link="h100-sxm:pcie5", repeat=1)
    net = memopt.optimize(seq, x, budget="min", link="16GB/s", repeat=1)
    assert net.plan.profile["link"]["d2h_bytes_per_s"] == 16e9
    # A Sequential's plan holds for its sample's shape; another is refused, not run off-plan.
    with pytest.raises(ValueError, match=r"made for inputs of shape \(16, 48\), got \(8, 48\)"):
        net(x[:8])


@pytest.mark.skipif(not os.path.exists(CLI), reason="the memopt CLI is not built")
def test_profile_solve_simulate_share_the_clis_json(tmp_path):
    seq, x = mlp(), torch.randn(16, 48)
    profile_path = tmp_path / "profile.json"
    schedule_path = tmp_path / "schedule.json"
    profile = memopt.profile(seq, x, out=str(profile_path), repeat=1)
    assert json.loads(profile_path.read_text()) == profile
    schedule = memopt.solve(str(profile_path), "60%", out=str(schedule_path))

    # The CLI reads both files and agrees with memopt.simulate.
    run = subprocess.run([CLI, "simulate", "--profile", str(profile_path), "--schedule", str(schedule_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    sim = memopt.simulate(profile, schedule)
    assert sim["fits"] and sim["peak_bytes"] == schedule["predicted"]["peak_bytes"]

    # The CLI's solve on the Python profile gives the Python schedule, with a link too.
    offloading = memopt.solve(profile, "min", link="16GB/s")
    assert any(op[0].startswith("offload") for op in offloading["ops"])
    for budget, link, python_schedule in (("60%", [], schedule), ("min", ["--bandwidth", "16GB/s"], offloading)):
        cli_schedule = tmp_path / "cli.json"
        run = subprocess.run([CLI, "solve", "--profile", str(profile_path), "--budget", budget, *link,
                              "--out", str(cli_schedule)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert json.loads(cli_schedule.read_text())["ops"] == python_schedule["ops"]
    # Files written from Python are laid out as the CLI writes them, byte for byte.
    memopt.solve(str(profile_path), "60%", out=str(tmp_path / "python.json"))
    run = subprocess.run([CLI, "solve", "--profile", str(profile_path), "--budget", "60%", "--out", str(cli_schedule)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "python.json").read_text() == cli_schedule.read_text()

    # memopt.solve reads a profile the CLI's estimator wrote.
    estimated = tmp_path / "estimated.json"
    run = subprocess.run([CLI, "estimate", "--preset", "small", "--gpu", "h100-80gb", "--batch", "1", "--seq", "256",
                          "--out", str(estimated)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    s = memopt.solve(str(estimated), "60%")
    assert s["predicted"]["peak_bytes"] <= s["budget_bytes"]

    with pytest.raises(ValueError, match="the schedule"):
        bad = dict(schedule, ops=schedule["ops"][1:])
        memopt.simulate(profile, bad)


def test_autocast_steps_train_as_plain_autocast_training_bit_for_bit():
    """Forward under CPU autocast to bfloat16, backward outside it, as training loops
    are written: the recomputations in the backward run under the forward's autocast
    (Note [Recompute under the forward's autocast]), so every gradient is plain's."""
    plain = mlp()
    seq = copy.deepcopy(plain)
    x = torch.randn(16, 48)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        net = memopt.optimize(seq, x, budget="min", repeat=1)
    assert net.plan.profile["model"]["autocast"] == "bfloat16"
    assert net.plan.profile["model"]["dtype"] == "float32"
    assert net.plan.schedule["profiled_on"] == {"device": "cpu", "dtype": "float32"}
    assert any(op[0] == "fwd_ckpt" for op in net.plan.schedule["ops"])  # it recomputes
    for model in (plain, net):
        model.zero_grad(set_to_none=False)
        torch.manual_seed(5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
    for p, q in zip(plain.parameters(), net.seq.parameters()):
        assert torch.equal(p.grad, q.grad)
    # A step without the autocast it was planned under is refused, naming the fix.
    with pytest.raises(ValueError, match="profiled under autocast to bfloat16 and this step runs without autocast"):
        net(x)


def test_a_model_on_two_devices_is_refused_naming_both():
    seq, x = mlp(), torch.randn(16, 48)
    seq[0].to("meta")
    with pytest.raises(ValueError, match="is on meta and the sample input on cpu; memopt plans a model on one device"):
        memopt.optimize(seq, x, repeat=1)


def test_the_testbed_meter_counts_requested_bytes_and_rejects_other_devices():
    memopt.testbed.reset_peak()
    before = memopt.testbed.current_bytes()
    t = torch.empty(1000, dtype=torch.uint8)
    assert memopt.testbed.current_bytes() - before == 1000  # to the byte, not rounded to a block
    assert memopt.testbed.peak_bytes() >= before + 1000
    del t
    with pytest.raises(ValueError, match="neither the CPU nor a CUDA GPU"):
        memopt.testbed.current_bytes("meta")

"""memopt.optimize on an unmodified Hugging Face GPT2LMHeadModel, against plain HF
training and HF's own gradient checkpointing: gradients bit for bit with dropout on,
activation peaks within the budget and as predicted."""
import copy

import pytest
import torch

import memopt
from memopt import testbed

transformers = pytest.importorskip("transformers")

B, T = 2, 32


def tiny_gpt2(n_layer=3, dropout=0.1, seed=0, attention="eager"):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=96, n_positions=T, n_embd=64, n_head=4, n_layer=n_layer,
                                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                                     bos_token_id=0, eos_token_id=0)
    config._attn_implementation = attention
    model = transformers.GPT2LMHeadModel(config)
    model.train()
    return model


def enable_hf_checkpointing(model):
    """HF's gradient checkpointing (renamed activation checkpointing in recent versions)."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 96, (B, T), generator=g)


def step(model, ids, seed):
    """One step of the user's loop; returns the loss and the activation peak: the
    most the testbed allocator held above what existed before the step."""
    model.zero_grad(set_to_none=False)
    torch.manual_seed(seed)
    base = testbed.current_bytes()
    testbed.reset_peak()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    peak = testbed.peak_bytes() - base
    return loss.detach(), peak


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_same_grads(a, b):
    assert a.keys() == b.keys()
    for n in a:
        assert torch.equal(a[n], b[n]), f"gradient of {n} differs: max |diff| {(a[n] - b[n]).abs().max().item()}"


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.mark.parametrize("granularity", ["block", "sublayer"])
@pytest.mark.parametrize("budget,link,solver", [
    ("100%", None, "optimal"),
    ("60%", None, "optimal"),
    ("min", None, "optimal"),
    ("100%", None, "recompute-all"),
    ("100%", "h100-sxm:pcie5", "offload-all"),
    ("50%", "h100-sxm:pcie5", "optimal"),
    ("60%", "100GB/s", "optimal"),           # moves saved state (offload_saved)
    ("40%", "gh200:nvlink-c2c", "optimal"),  # moves an input and saved state
])
def test_gradients_equal_plain_hf_training_bit_for_bit(granularity, budget, link, solver):
    plain = tiny_gpt2()
    model = copy.deepcopy(plain)
    ids = batch()
    memopt.optimize(model, ids, budget=budget, link=link, granularity=granularity, solver=solver, repeat=1)
    for seed in (11, 12):  # a second step: the runner and its copy engine are reused
        ref_loss, _ = step(plain, ids, seed)
        loss, _ = step(model, ids, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(grads(model), grads(plain))
    ops = [op[0] for op in model.memopt_plan.schedule["ops"]]
    if solver == "offload-all":
        assert "offload" in ops and "prefetch" in ops
    if link in ("100GB/s", "gh200:nvlink-c2c") and granularity == "block":
        assert "offload_saved" in ops and "prefetch_saved" in ops


@pytest.mark.parametrize("budget,link", [("min", None), ("60%", "100GB/s")])
def test_sdpa_attention_as_hf_loads_models_by_default(budget, link):
    plain = tiny_gpt2(attention="sdpa")
    model = copy.deepcopy(plain)
    ids = batch()
    memopt.optimize(model, ids, budget=budget, link=link, repeat=1)
    assert model.memopt_plan.profile["model"]["attention"] == "sdpa"
    for seed in (21, 22):
        ref_loss, _ = step(plain, ids, seed)
        loss, _ = step(model, ids, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(grads(model), grads(plain))


@pytest.mark.parametrize("budget,link", [("100%", None), ("50%", None), ("60%", "100GB/s")])
def test_bfloat16_autocast_peaks_are_predicted_and_gradients_are_plain(budget, link):
    """Under autocast the weights' bfloat16 copies are activations too: saved by the
    stages that keep them, temporaries of those that do not (Note [A stage leaves no
    cached casts] in model/staged_model.cpp). The profile counts them as the step
    allocates them, so the peak is the prediction, and an offload plan's pool holds
    the copies it moves."""
    plain = tiny_gpt2(attention="sdpa")
    model = copy.deepcopy(plain)
    ids = batch()
    for m in (plain, model):  # the gradients exist before the measured steps: static state
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memopt.optimize(model, ids, budget=budget, link=link, repeat=1)
    plan = model.memopt_plan
    ops = [op[0] for op in plan.schedule["ops"]]
    if link:
        assert "offload_saved" in ops
    def autocast_step(m, seed):  # forward under autocast, backward outside it, as loops are written
        m.zero_grad(set_to_none=False)
        torch.manual_seed(seed)
        base = testbed.current_bytes()
        testbed.reset_peak()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach(), testbed.peak_bytes() - base

    for seed in (31, 32):
        ref_loss, _ = autocast_step(plain, seed)
        loss, peak = autocast_step(model, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(grads(model), grads(plain))
        assert peak <= plan.budget_bytes
        # What the step allocates beyond the activations -- the loss's scalars -- is a
        # few KiB.
        assert abs(peak - plan.predicted["peak_bytes"]) <= 16 << 10


def test_gradients_equal_hf_gradient_checkpointing():
    reference = tiny_gpt2()
    model = copy.deepcopy(reference)
    enable_hf_checkpointing(reference)
    ids = batch()
    memopt.optimize(model, ids, budget="min", repeat=1)
    ref_loss, _ = step(reference, ids, 5)
    loss, _ = step(model, ids, 5)
    assert torch.equal(loss, ref_loss)
    assert_same_grads(grads(model), grads(reference))


def test_peak_stays_within_the_budget_falls_with_it_and_is_predicted():
    ids = batch()
    peaks = []
    for budget in ("100%", "70%", "40%", "min"):
        model = tiny_gpt2()
        memopt.optimize(model, ids, budget=budget, repeat=1)
        step(model, ids, 3)  # warm-up: lazily allocated state
        _, peak = step(model, ids, 3)
        plan = model.memopt_plan
        predicted = plan.predicted["peak_bytes"]
        assert peak <= plan.budget_bytes, (budget, peak, plan.budget_bytes)
        # The prediction counts a_0, the B x T int64 token ids, which the caller
        # allocated before the step; nothing else may differ.
        assert abs(peak - predicted) <= B * T * 8, (budget, peak, predicted)
        peaks.append(peak)
    assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


def test_memopt_at_hf_checkpointings_peak_fits_it():
    ids = batch()
    hf = tiny_gpt2()
    enable_hf_checkpointing(hf)
    step(hf, ids, 3)
    _, hf_peak = step(hf, ids, 3)
    model = tiny_gpt2()
    memopt.optimize(model, ids, budget=str(hf_peak), repeat=1)
    step(model, ids, 3)
    _, peak = step(model, ids, 3)
    assert peak <= hf_peak


def test_eval_and_no_grad_run_the_models_own_forward():
    model = tiny_gpt2()
    ids = batch()
    plain = copy.deepcopy(model)
    memopt.optimize(model, ids, budget="min", repeat=1)
    with torch.no_grad():  # in training mode: dropout draws, so the same seed for both
        torch.manual_seed(4)
        out = model(input_ids=ids, labels=ids)
        torch.manual_seed(4)
        ref = plain(input_ids=ids, labels=ids)
    assert out.logits is not None and torch.equal(out.logits, ref.logits)
    memopt.unoptimize(model)
    assert "forward" not in model.__dict__ and not hasattr(model, "memopt_plan")


def test_errors_say_what_is_wrong_and_the_fix():
    ids = batch()
    model = tiny_gpt2()
    with pytest.raises(memopt.InfeasibleBudget, match=r"smallest budget that works is .* Pass budget="):
        memopt.optimize(model, ids, budget="1KiB", repeat=1)

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(TypeError, match="not chain-shaped"):
        memopt.optimize(Branchy(), ids)

    on_meta = tiny_gpt2().to("meta")
    with pytest.raises(ValueError, match=r"tensor 'transformer\.wte\.weight' is on meta"):
        memopt.optimize(on_meta, ids)

    memopt.optimize(model, ids, budget="min", repeat=1, other_shapes=False)
    with pytest.raises(ValueError, match=r"made for input_ids of shape \(2, 32\), got \(1, 32\)"):
        model(input_ids=ids[:1], labels=ids[:1])
    with pytest.raises(ValueError, match="got token_type_ids"):
        model(input_ids=ids, labels=ids, token_type_ids=ids)
    with pytest.raises(ValueError, match="granularity 'op' is not block or sublayer"):
        memopt.optimize(tiny_gpt2(), ids, granularity="op")
    with pytest.raises(ValueError, match="unknown GPU 'tpu'"):
        memopt.optimize(tiny_gpt2(), ids, link="tpu:pcie5", repeat=1)


def test_a_saved_profile_is_reused_and_a_foreign_one_refused(tmp_path):
    ids = batch()
    first = tiny_gpt2()
    memopt.optimize(first, ids, budget="60%", link="h100-sxm:pcie5", repeat=1, save=str(tmp_path))
    again = tiny_gpt2()
    memopt.optimize(again, ids, budget="60%", profile=str(tmp_path / "profile.json"))
    assert "link" not in again.memopt_plan.profile  # link=None: recomputation only
    plain = tiny_gpt2()
    step(plain, ids, 9)
    step(again, ids, 9)
    assert_same_grads(grads(again), grads(plain))
    with pytest.raises(ValueError, match="are not this model's"):
        memopt.optimize(tiny_gpt2(n_layer=2), ids, profile=first.memopt_plan.profile)
    with pytest.raises(ValueError, match="model/batch is 2, the sample's 1"):
        memopt.optimize(tiny_gpt2(), ids[:1], profile=first.memopt_plan.profile)


def test_pytorchs_saved_tensor_hooks_keep_working_after_memopt_moved_saved_state():
    """memopt captures saved tensors through the autograd engine's hook point; after
    it did, Python's saved_tensors_hooks (HF's checkpointing is built on them) must
    still be called, and HF's checkpointing must still recompute."""
    ids = batch()
    model = tiny_gpt2()
    memopt.optimize(model, ids, budget="60%", link="100GB/s", repeat=1)
    assert "offload_saved" in [op[0] for op in model.memopt_plan.schedule["ops"]]
    step(model, ids, 1)
    packed = []
    x = torch.randn(4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        (x * x).sum().backward()
    assert len(packed) == 2
    hf = tiny_gpt2()
    enable_hf_checkpointing(hf)
    calls = [0]
    hf.transformer.h[0].ln_1.register_forward_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
    step(hf, ids, 1)
    assert calls[0] == 2  # the forward, and the recomputation in backward


def test_a_second_forward_before_the_backward_of_an_offloading_plan_is_refused():
    ids = batch()
    model = tiny_gpt2()
    memopt.optimize(model, ids, budget="100%", link="h100-sxm:pcie5", solver="offload-all", repeat=1)
    loss = model(input_ids=ids, labels=ids).loss
    with pytest.raises(ValueError, match="previous step's backward is still to come"):
        model(input_ids=ids, labels=ids)
    loss.backward()
    model(input_ids=ids, labels=ids).loss.backward()  # the next step may start now
    dropped = model(input_ids=ids, labels=ids).loss
    del dropped  # a step abandoned before its backward ends too
    model(input_ids=ids, labels=ids).loss.backward()


def test_a_padded_batch_with_an_attention_mask_and_ignored_labels():
    plain = tiny_gpt2()
    model = copy.deepcopy(plain)
    ids = batch()
    mask = torch.ones_like(ids)
    mask[1, T // 2:] = 0  # the second sequence is padded
    labels = ids.masked_fill(mask == 0, -100)
    memopt.optimize(model, {"input_ids": ids, "labels": labels}, budget="min", repeat=1)
    for m in (plain, model):
        m.zero_grad()
        torch.manual_seed(31)
        m(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    assert_same_grads(grads(model), grads(plain))


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_gpt2_batches_of_other_shapes_train_exactly_on_their_own_plans(attention):
    """Note [How a profile scales with the batch shape], with an emulated link, which
    each shape's plan emulates again from that shape's times."""
    plain = tiny_gpt2(attention=attention)
    model = copy.deepcopy(plain)
    memopt.optimize(model, batch(), budget="50%", link="h100-sxm:pcie5", granularity="sublayer", repeat=1)
    assert model.memopt_plans.law is not None, model.memopt_plans.why_no_law
    for seed, shape in enumerate([(2, 20), (1, 31)]):
        ids = torch.randint(0, plain.config.vocab_size, shape, generator=torch.Generator().manual_seed(seed))
        ref_loss, _ = step(plain, ids, 70 + seed)
        loss, _ = step(model, ids, 70 + seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(grads(model), grads(plain))
        plan = model.memopt_plans[shape]
        assert plan.budget_bytes == model.memopt_plan.budget_bytes and "link" in plan.profile
        assert plan.profile["model"]["scaled_from"] == {"batch": B, "seq_len": T}

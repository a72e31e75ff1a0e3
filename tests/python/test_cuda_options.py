"""memopt.optimize's options for a causal LM on CUDA models -- compiled stages
(compile_stages=True), a chunked head (chunked_loss=True) and both at once -- against
plain training and memopt's own store-all plan on the same GPU: losses and gradients,
peaks within the budget and as predicted. A file of its own beside
test_cuda_optimize.py, whose model, batch and step it uses, so that the GPU check runs
the two side by side. Skips itself without a GPU or without the CUDA backend."""
import copy

import pytest
import torch

import memopt

pytest.importorskip("transformers")

from test_cuda_optimize import batch, deterministic, gpt2, step, warm_up  # noqa: E402,F401  (the fixture by name)

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible"),
    pytest.mark.skipif(not memopt._core.cuda_built(), reason="this memopt package has no CUDA backend"),
]


def assert_trains_as_plain(model, plain, ids, seed, dtype=None):
    """A step of `model` after a warm-up: plain training's loss and gradients up to the
    order of the sums (the chunked head's), its peak within the budget and as predicted."""
    warm_up((plain, model), ids, dtype)
    ref_loss, _, _ = step(plain, ids, seed + 1, dtype)
    loss, peak, _ = step(model, ids, seed + 1, dtype)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-5)
    tolerance = dict(rtol=1e-2, atol=1e-3) if dtype else dict(rtol=1e-3, atol=1e-5)
    for (n, p), q in zip(model.named_parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tolerance, msg=lambda m: f"{n}: {m}")
    plan = model.memopt_plan
    assert peak <= plan.budget_bytes
    assert abs(peak - plan.predicted["peak_bytes"]) <= 16 << 10


@pytest.mark.parametrize("budget,link", [("100%", None), ("min", None), ("50%", "measured")])
def test_compiled_stages_train_as_storing_everything_and_peak_as_predicted(budget, link):
    """compile_stages=True (Note [Compiled stages] in python/memopt/_compile.py): every
    plan's step equals the compiled store-all plan's bit for bit, within a tolerance of
    the eager model's (the same masks, fused kernels), its peak within the budget and
    as predicted."""
    plain = gpt2("sdpa")
    ids = batch()
    steps = {}
    for b, l in {("100%", None), (budget, link)}:
        model = copy.deepcopy(plain)
        memopt.optimize(model, ids, budget=b, link=l, repeat=2, other_shapes=False, compile_stages=True)
        warm_up((model,), ids)
        loss, peak, _ = step(model, ids, 11)
        plan = model.memopt_plan
        assert peak <= plan.budget_bytes
        assert abs(peak - plan.predicted["peak_bytes"]) <= 16 << 10
        steps[(b, l)] = (loss, [p.grad.clone() for p in model.parameters()])
    warm_up((plain,), ids)
    ref_loss, _, _ = step(plain, ids, 11)
    loss, grads = steps[(budget, link)]
    all_loss, all_grads = steps[("100%", None)]
    assert torch.equal(loss, all_loss)
    for g, h in zip(grads, all_grads):
        assert torch.equal(g, h)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("budget,link", [("min", None), ("min", "measured")])
def test_a_chunked_head_trains_as_plain_and_lowers_the_floor(dtype, budget, link):
    """chunked_loss=True (Note [A chunked head] in python/memopt/_chunked_loss.py): the
    loss and gradients of plain training up to the order of the sums, a smallest budget
    below the model's own head's, peaks as predicted. A vocabulary wide enough that the
    logits set the floor of the model's own head in bfloat16 too (ids stay below 512)."""
    plain = gpt2("sdpa", vocab_size=4096)
    own, model = copy.deepcopy(plain), copy.deepcopy(plain)
    ids = batch()
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        memopt.optimize(own, ids, budget="min", repeat=2, other_shapes=False)
        memopt.optimize(model, ids, budget=budget, link=link, repeat=2, other_shapes=False, chunked_loss=True)
    assert model.memopt_plan.budget_bytes < own.memopt_plan.budget_bytes
    assert_trains_as_plain(model, plain, ids, 20, dtype)


@pytest.mark.parametrize("budget,link", [("min", None), ("min", "measured")])
def test_compiled_stages_with_a_chunked_head_train_as_plain_and_peak_as_predicted(budget, link):
    """Both options at once: the chunked head's loop traced into its stage's graphs."""
    plain = gpt2("sdpa")
    model = copy.deepcopy(plain)
    ids = batch()
    memopt.optimize(model, ids, budget=budget, link=link, repeat=2, other_shapes=False, compile_stages=True,
                    chunked_loss=True)
    plan = model.memopt_plan
    assert (plan.profile["model"]["loss"], plan.profile["model"]["compiled"]) == ("chunked", "torch.compile")
    assert_trains_as_plain(model, plain, ids, 30)

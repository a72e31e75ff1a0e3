"""What an optimized model holds, and when it is freed: a model memopt optimized is
freed with its plans once the caller drops it (or unoptimizes it), its device memory
with it (Note [A chain holds its model weakly] in python/core_module.cpp); a loss kept
past the object that made it still runs its backward (Note [A step holds its plan and
its model])."""
import copy
import gc
import weakref

import pytest
import torch

import memopt
from memopt import testbed

transformers = pytest.importorskip("transformers")

from test_optimize_hf import B, T, batch, grads, tiny_gpt2  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def optimized_gpt2(ids, **options):
    """A tiny GPT-2 optimized at the smallest budget and trained one step, and a weak
    reference to it."""
    model = tiny_gpt2()
    memopt.optimize(model, ids, budget="min", repeat=1, progress=False, **options)
    model(input_ids=ids, labels=ids).loss.backward()
    return model, weakref.ref(model)


@pytest.mark.parametrize("options", [{}, {"link": "100GB/s", "other_shapes": False},
                                     {"compile_stages": True, "other_shapes": False}],
                         ids=["recompute", "offload", "compiled"])
def test_a_dropped_language_model_is_freed_with_its_bytes(options):
    ids = batch()
    gc.collect()
    before = testbed.current_bytes()
    model, alive = optimized_gpt2(ids, **options)
    held = testbed.current_bytes() - before
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert held >= 2 * parameter_bytes  # the parameters and their gradients
    del model
    gc.collect()
    assert alive() is None
    # Its parameters, gradients and plans' buffers all returned: at most the generator
    # states and caches the process keeps are left, far below one copy of the weights.
    assert testbed.current_bytes() - before < parameter_bytes / 4, (testbed.current_bytes() - before, parameter_bytes)


def test_unoptimize_frees_the_plans_and_a_second_optimize_the_first_plans():
    ids = batch()
    model, _ = optimized_gpt2(ids, other_shapes=False)
    first = weakref.ref(model.memopt_plans._plans)
    memopt.optimize(model, ids, budget="100%", repeat=1, progress=False, other_shapes=False)
    gc.collect()
    assert first() is None
    second = weakref.ref(model.memopt_plans._plans)
    memopt.unoptimize(model)
    gc.collect()
    assert second() is None


def test_a_loss_kept_past_its_model_runs_its_backward_then_frees_it():
    ids = batch()
    plain = tiny_gpt2()
    model, alive = optimized_gpt2(ids, other_shapes=False)
    model.load_state_dict(plain.state_dict())
    model.zero_grad(set_to_none=True)
    parameters = dict(model.named_parameters())
    torch.manual_seed(3)
    loss = model(input_ids=ids, labels=ids).loss
    del model
    gc.collect()
    assert alive() is not None  # the step's graph holds it until its backward
    loss.backward()  # recomputes stages (budget "min"): the stages must still be there
    del loss
    gc.collect()
    assert alive() is None
    torch.manual_seed(3)
    plain(input_ids=ids, labels=ids).loss.backward()
    for n, p in plain.named_parameters():
        assert torch.equal(parameters[n].grad, p.grad), n


def test_a_sequential_trains_from_a_wrapper_dropped_at_once_and_is_freed():
    torch.manual_seed(0)
    seq = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh()) for _ in range(6)])
    plain = copy.deepcopy(seq)
    x = torch.randn(B, T, 32)
    # The OptimizedSequential is gone before the backward, which recomputes.
    out = memopt.optimize(seq, x, budget="min", repeat=1, progress=False)(x)
    gc.collect()
    out.square().sum().backward()
    plain(x).square().sum().backward()
    assert grads(seq).keys() == grads(plain).keys()
    for (n, p), q in zip(seq.named_parameters(), plain.parameters()):
        assert torch.equal(p.grad, q.grad), n
    alive = weakref.ref(seq)
    del seq, out
    gc.collect()
    assert alive() is None

"""memopt.optimize(compile_stages=True): each stage's forward compiled with torch.compile
(Note [Compiled stages] in python/memopt/_compile.py), on an unmodified Hugging Face
GPT-2 with dropout on -- the same gradients from every plan, bit for bit, what the eager
model computes up to the fused kernels' rounding, and activation peaks as predicted."""
import copy

import pytest
import torch

import memopt

transformers = pytest.importorskip("transformers")

from test_optimize_hf import B, T, batch, grads, tiny_gpt2  # noqa: E402  (the eager tests' model and batch)
from test_optimize_hf import step as eager_step  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def step(model, ids, seed):
    """One step of the user's loop: its loss, gradients and activation peak."""
    loss, peak = eager_step(model, ids, seed)
    return loss, grads(model), peak


PLANS = [("100%", None), ("min", None), ("60%", "100GB/s")]  # store-all, recomputation, saved state moved


def test_every_plan_of_compiled_stages_trains_as_the_eager_model_does():
    plain = tiny_gpt2()
    ids = batch()
    results = {}
    for budget, link in PLANS:
        model = copy.deepcopy(plain)
        memopt.optimize(model, ids, budget=budget, link=link, repeat=1, other_shapes=False, compile_stages=True)
        plan = model.memopt_plan
        assert plan.profile["model"]["compiled"] == "torch.compile"
        ops = [op[0] for op in plan.schedule["ops"]]
        if budget == "min":
            assert "fwd_ckpt" in ops
        if link:
            assert "offload_saved" in ops and "prefetch_saved" in ops
        results[budget] = [step(model, ids, seed) for seed in (7, 8)]
    eager = [step(plain, ids, seed) for seed in (7, 8)]
    for budget, _ in PLANS:
        for (loss, grads, _), (ref_loss, ref_grads, _), (sa_loss, sa_grads, _) in zip(results[budget], eager,
                                                                                     results["100%"]):
            # Each stage runs the same compiled graphs in every plan, and a recomputation
            # redraws the masks: bit for bit the store-all plan's step.
            assert torch.equal(loss, sa_loss), budget
            for n in grads:
                assert torch.equal(grads[n], sa_grads[n]), (budget, n)
            # The eager model's masks (fallback_random), its arithmetic up to the fused
            # kernels' rounding: a mask drawn differently would change the loss by far
            # more than this.
            torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
            for n in grads:
                torch.testing.assert_close(grads[n], ref_grads[n], rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


def test_compiled_stages_peak_within_the_budget_as_predicted():
    ids = batch()
    for budget in ("70%", "min"):
        model = tiny_gpt2()
        memopt.optimize(model, ids, budget=budget, repeat=1, other_shapes=False, compile_stages=True)
        step(model, ids, 3)  # warm-up
        _, _, peak = step(model, ids, 3)
        plan = model.memopt_plan
        assert peak <= plan.budget_bytes, (budget, peak, plan.budget_bytes)
        # As for eager stages: the prediction counts a_0, the token ids the caller made.
        assert abs(peak - plan.predicted["peak_bytes"]) <= B * T * 8, (budget, peak, plan.predicted["peak_bytes"])


def test_a_profile_of_eager_stages_is_refused_for_compiled_ones_and_back():
    ids = batch()
    model = tiny_gpt2(n_layer=1)
    eager = memopt.profile(model, ids, repeat=1, progress=False)
    assert "compiled" not in eager["model"]
    with pytest.raises(ValueError, match="compile_stages=False"):
        memopt.optimize(model, ids, profile=eager, other_shapes=False, compile_stages=True)
    compiled = memopt.profile(model, ids, repeat=1, progress=False, compile_stages=True)
    with pytest.raises(ValueError, match="compile_stages=True"):
        memopt.optimize(model, ids, profile=compiled, other_shapes=False)
    with pytest.raises(TypeError, match="compile_stages must be True or False"):
        memopt.optimize(model, ids, other_shapes=False, compile_stages="yes")


def test_every_stage_of_a_long_heterogeneous_sequential_gets_its_own_graphs():
    """Dynamo keeps a few graphs per code object; the stages are closures of one
    function, so each is compiled from a code object of its own (Note [Compiled
    stages]) and none falls back to running eagerly."""
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    layers = []
    for i in range(10):
        layers += [torch.nn.Linear(32, 32), torch.nn.GELU() if i % 2 else torch.nn.Tanh()]
    seq = torch.nn.Sequential(*layers)
    plain = copy.deepcopy(seq)
    x = torch.randn(8, 32)
    graphs_before = counters["stats"]["unique_graphs"]
    model = memopt.optimize(seq, x, budget="50%", repeat=1, compile_stages=True)
    # The profile runs every stage with autograd and without: two graphs each.
    assert counters["stats"]["unique_graphs"] - graphs_before >= 2 * len(layers)
    model(x).square().sum().backward()
    plain(x).square().sum().backward()
    for (n, p), q in zip(seq.named_parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("granularity", ["block", "sublayer"])
def test_a_llama_with_compiled_stages_trains_as_the_eager_model_also_on_a_shorter_batch(granularity):
    """A decoder's embedding stage stops the model's forward at the first block by an
    exception, which runs eagerly (until_first_block in _blocks.py); the blocks and the
    head compile, and a batch of another shape compiles them again, on its own plan."""
    import test_optimize_decoders as decoders
    plain = decoders.decoder("llama")  # attention dropout on
    model = copy.deepcopy(plain)
    ids = decoders.batch()
    shapes = granularity == "sublayer"  # the shape probes compile each stage again: once is enough
    memopt.optimize(model, ids, budget="min", granularity=granularity, repeat=1, compile_stages=True,
                    other_shapes=shapes)
    assert "fwd_ckpt" in [op[0] for op in model.memopt_plan.schedule["ops"]]
    for x in (ids, ids[:1, :20].clone()) if shapes else (ids,):
        ref_loss, _ = decoders.step(plain, x, 4)
        ref_grads = grads(plain)
        loss, _ = decoders.step(model, x, 4)
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
        for n, g in grads(model).items():
            torch.testing.assert_close(g, ref_grads[n], rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")
    if shapes:
        assert (1, 20) in model.memopt_plans


def test_stages_first_compiled_inside_a_step_that_moves_saved_state():
    """A profile reused for new compiled stages (or a new batch shape) makes Dynamo trace
    a stage inside the step, while its saved state is being captured for offloading:
    the fake tensors of the trace are no saved state (Note [Tensors with no memory of
    their own] in runtime/saved_state.cpp), and the step trains as the eager model."""
    plain = tiny_gpt2()
    model = copy.deepcopy(plain)
    ids = batch()
    # The profile of a twin: the model's own stages have not yet been traced (a profile
    # of the model itself would leave them traced, Note [One code object per stage of a
    # model]).
    profile = memopt.profile(copy.deepcopy(plain), ids, repeat=1, progress=False, compile_stages=True)
    memopt.optimize(model, ids, budget="60%", link="100GB/s", profile=profile, other_shapes=False,
                    compile_stages=True)
    assert "offload_saved" in [op[0] for op in model.memopt_plan.schedule["ops"]]
    (loss, g, _), (ref_loss, ref_g, _) = step(model, ids, 9), step(plain, ids, 9)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for n in ref_g:
        torch.testing.assert_close(g[n], ref_g[n], rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


def test_plans_of_one_model_run_the_graphs_its_profile_traced():
    """Each optimize() builds the chain again; the model's stages are compiled from the
    code objects its profile's were (Note [One code object per stage of a model]), so
    no plan traces a stage again, and each trains as a model that traced its own."""
    from torch._dynamo.utils import counters
    plain = tiny_gpt2()
    ids = batch()
    model = copy.deepcopy(plain)
    profile = memopt.profile(model, ids, repeat=1, progress=False, compile_stages=True)
    graphs = counters["stats"]["unique_graphs"]
    for budget, link in PLANS[1:]:
        memopt.optimize(model, ids, budget=budget, link=link, profile=profile, other_shapes=False,
                        compile_stages=True)
        loss, g, _ = step(model, ids, 5)
        assert counters["stats"]["unique_graphs"] == graphs, (budget, link)
        # The same plan on a model that traced its stages itself, step for step.
        twin = copy.deepcopy(plain)
        memopt.optimize(twin, ids, budget=budget, link=link, profile=profile, other_shapes=False,
                        compile_stages=True)
        twin_loss, twin_g, _ = step(twin, ids, 5)
        assert counters["stats"]["unique_graphs"] > graphs, (budget, link)  # its own graphs
        graphs = counters["stats"]["unique_graphs"]
        assert torch.equal(loss, twin_loss), (budget, link)
        for n in g:
            assert torch.equal(g[n], twin_g[n]), (budget, link, n)

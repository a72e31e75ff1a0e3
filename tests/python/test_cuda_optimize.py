"""memopt.optimize on CUDA models, against plain training on the same GPU: Hugging Face
GPT-2 with sdpa and eager attention, float32 and bfloat16 under torch.autocast, and an
nn.Sequential -- gradients bit for bit with deterministic algorithms on, for recompute,
offload and saved-state offload plans; each step's peak (the caching allocator's
requested bytes, and torch.cuda.max_memory_allocated, above the step's baseline)
within the budget and against the prediction; errors for a model on two devices and a
budget below the minimum; a dropped model's GPU memory given back. Skips itself without
a GPU or without the CUDA backend."""
import copy
import gc
import os
import weakref

import pytest
import torch
from torch import nn

import memopt
from memopt import testbed

transformers = pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible"),
    pytest.mark.skipif(not memopt._core.cuda_built(), reason="this memopt package has no CUDA backend"),
]

B, T = 4, 128
CUDA = torch.device("cuda", 0)


@pytest.fixture(autouse=True)
def deterministic():
    # cuBLAS fixes its reduction order only with a fixed workspace, set before its
    # first handle; ATen's atomics-based kernels are swapped for deterministic ones.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(False)


def gpt2(attention, dropout=0.1, n_layer=4, seed=0, vocab_size=512):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=T, n_embd=128, n_head=4, n_layer=n_layer,
                                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                                     bos_token_id=0, eos_token_id=0)
    config._attn_implementation = attention
    return transformers.GPT2LMHeadModel(config).to(CUDA).train()


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 512, (B, T), generator=g).to(CUDA)


def step(model, ids, seed, dtype=None):
    """One step of the user's loop (forward under autocast when `dtype`, backward
    outside it); the loss and the peaks above the step's baseline: requested bytes and
    max_memory_allocated."""
    model.zero_grad(set_to_none=False)
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    torch.cuda.synchronize()
    base, base_alloc = testbed.current_bytes(CUDA), torch.cuda.memory_allocated(CUDA)
    testbed.reset_peak(CUDA)
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.cuda.synchronize()
    return (loss.detach(), testbed.peak_bytes(CUDA) - base, torch.cuda.max_memory_allocated(CUDA) - base_alloc)


def warm_up(models, ids, dtype=None):
    """What a loop's first step makes once, before the measured steps: the .grad
    buffers, static state a plan counts apart from its activations, and a process's
    one-time blocks (a process's first recomputing step made one lasting 1 MiB block
    that no later step makes again: measured on a GPU, the allocator's trace of that
    step held one more allocation and no more frees than the next step's)."""
    for m in models:
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        step(m, ids, 10, dtype)


def assert_same_grads(a, b):
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p.grad, q.grad), f"gradient of {n} differs: max |diff| {(p.grad - q.grad).abs().max()}"


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("budget,link", [
    ("min", None),          # recomputation only
    ("50%", "measured"),    # recomputation and offloading over the GPU's own link
    ("min", "measured"),    # the tightest plan: moves saved state and inputs too
])
def test_gradients_equal_plain_training_and_peaks_stay_in_budget(attention, dtype, budget, link):
    plain = gpt2(attention)
    model = copy.deepcopy(plain)
    ids = batch()
    with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        memopt.optimize(model, ids, budget=budget, link=link, repeat=2)
    plan = model.memopt_plan
    assert plan.profile["device"]["kind"] == "cuda"
    assert plan.schedule["profiled_on"]["device"] == "cuda"
    warm_up((plain, model), ids, dtype)
    for seed in (11, 12):  # the second step reuses the runner, its engine and its pool
        ref_loss, _, _ = step(plain, ids, seed, dtype)
        loss, peak, peak_alloc = step(model, ids, seed, dtype)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(model, plain)
        print(f"{attention} {dtype} {budget} {link}: peak {peak} (allocated {peak_alloc}), predicted "
              f"{plan.predicted['peak_bytes']}, budget {plan.budget_bytes}")
        assert peak <= plan.budget_bytes
        # The requested bytes are what the plan counts: equal to the prediction but for
        # what the step itself allocates beyond activations (the loss's scalar
        # outputs), at most a few KiB.
        assert abs(peak - plan.predicted["peak_bytes"]) <= 16 << 10


def test_sequential_on_cuda_trains_as_plain():
    torch.manual_seed(0)
    plain = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(256, 256), nn.GELU(), nn.Dropout(0.1))]).to(CUDA)
    seq = copy.deepcopy(plain)
    x = torch.randn(64, 256, device=CUDA)
    net = memopt.optimize(seq, x, budget="min", link="measured", repeat=2)
    for model in (plain, net):
        model.zero_grad(set_to_none=False)
        torch.manual_seed(3)
        torch.cuda.manual_seed(3)
        model(x).square().mean().backward()
    for p, q in zip(plain.parameters(), net.seq.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_a_model_split_across_devices_is_refused():
    model = gpt2("sdpa")
    model.lm_head.to("cpu")
    with pytest.raises(ValueError, match="memopt plans a model on one device"):
        memopt.optimize(model, batch(), repeat=1)


def test_a_budget_below_the_minimum_names_the_minimum():
    with pytest.raises(memopt.InfeasibleBudget, match='budget="min"'):
        memopt.optimize(gpt2("sdpa"), batch(), budget=1 << 10, repeat=1)


def test_a_dropped_model_gives_its_gpu_memory_back():
    """An optimized model the caller drops is freed, its parameters, gradients and
    plan's buffers with it (Note [A chain holds its model weakly] in
    python/core_module.cpp), with an offloading plan, whose copy engine holds streams
    and a pinned pool."""
    ids = batch()

    def trained():
        model = gpt2("sdpa")
        memopt.optimize(model, ids, budget="min", link="measured", repeat=1, other_shapes=False)
        warm_up((model,), ids)
        return model

    first = trained()  # the process's one-time state (workspaces, streams) made first
    del first
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(CUDA)
    model = trained()
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert torch.cuda.memory_allocated(CUDA) - before >= 2 * parameter_bytes  # weights and gradients
    alive = weakref.ref(model)
    del model
    gc.collect()
    torch.cuda.synchronize()
    assert alive() is None
    left = torch.cuda.memory_allocated(CUDA) - before
    assert left < parameter_bytes / 4, (left, parameter_bytes)

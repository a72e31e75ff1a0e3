"""memopt.optimize on a model that is a stack of blocks and nothing else memopt knows
of -- a small transformer written here, as a user writes their own -- against plain
training: outputs and gradients bit for bit over two steps with dropout on, for
recompute, offload, saved-state offload and optimal plans; the peak within the budget;
models whose cut would lose something refused by name (Note [Cutting a stack of
blocks])."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import memopt
from memopt import testbed

V, C, T, B = 64, 32, 24, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = nn.MultiheadAttention(C, 4, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C), nn.Dropout(0.1))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    """Embedding, position table and dropout; blocks reading a causal mask made in the
    forward; a final norm and head, whose output the caller's loss reads."""

    def __init__(self, layers=3, skip=False):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.pos = nn.Parameter(torch.randn(T, C) * 0.02)
        self.drop = nn.Dropout(0.1)
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.norm = nn.LayerNorm(C)
        self.head = nn.Linear(C, V)
        self.skip = skip

    def forward(self, ids):
        n = ids.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf"), device=ids.device), diagonal=1)
        x = e = self.drop(self.emb(ids) + self.pos[:n])
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x + e if self.skip else x))


def model(seed=0, **kw):
    torch.manual_seed(seed)
    return Transformer(**kw).train()


def batch(seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def step(m, ids, seed):
    m.zero_grad(set_to_none=False)
    torch.manual_seed(seed)
    base = testbed.current_bytes()
    testbed.reset_peak()
    out = m(ids)
    loss = F.cross_entropy(out.flatten(0, 1), ids.flatten())
    loss.backward()
    return out.detach(), testbed.peak_bytes() - base


def assert_same_grads(a, b):
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p.grad, q.grad), f"gradient of {n} differs"


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.mark.parametrize("budget,link,solver,expect", [
    ("min", None, "optimal", "fwd_ckpt"),
    ("100%", "16GB/s", "offload-all", "offload"),
    ("60%", "100GB/s", "optimal", "offload_saved"),
    ("40%", "2GB/s", "optimal", "offload_input"),
])
def test_a_stack_of_blocks_trains_as_plain_training_bit_for_bit(budget, link, solver, expect):
    plain = model()
    inner = copy.deepcopy(plain)
    net = memopt.optimize(inner, batch(), budget=budget, link=link, solver=solver, blocks=inner.layers, repeat=1,
                          progress=False)
    assert isinstance(net, memopt.OptimizedModel) and net.module is inner
    names = [s["name"] for s in net.plan.profile["stages"]]
    assert names == ["before", "blocks.0", "blocks.1", "blocks.2", "after"]
    for seed in (11, 12):
        ref, _ = step(plain, batch(), seed)
        out, _ = step(net, batch(), seed)
        assert torch.equal(out, ref)
        assert_same_grads(inner, plain)
    assert expect in [op[0] for op in net.plan.schedule["ops"]]
    net.eval()
    plain.eval()
    with torch.no_grad():  # evaluation: the model's own forward
        assert torch.equal(net(batch(3)), plain(batch(3)))


def test_saved_state_moves_and_the_peak_is_as_planned():
    plain = model(layers=4)
    inner = copy.deepcopy(plain)
    net = memopt.optimize(inner, batch(), budget="70%", link="1GB/s", blocks=inner.layers, repeat=1, progress=False)
    assert "offload_saved" in [op[0] for op in net.plan.schedule["ops"]]
    step(net, batch(), 5)  # warm-up: lazily allocated state
    ref, _ = step(plain, batch(), 6)
    out, peak = step(net, batch(), 6)
    assert torch.equal(out, ref)
    assert_same_grads(inner, plain)
    plan = net.plan
    # The step's inputs (ids, the mask) come before the step; the loss is the caller's.
    slack = B * T * 8 + T * T * 4 + B * T * V * 4 * 3
    assert peak <= plan.budget_bytes + slack, (peak, plan.budget_bytes)


def test_blocks_can_be_found_by_class_name_and_cuts_that_lose_something_are_refused():
    m = model()
    m._no_split_modules = ["Block"]
    net = memopt.optimize(m, batch(), budget="min", repeat=1, progress=False)
    assert len(net.plan.profile["stages"]) == 5

    # A skip from the embedding to the head: the chain would drop that gradient.
    with pytest.raises(TypeError, match=r"gives other gradients for .*emb\.weight.*skip around the blocks"):
        skipping = model(skip=True)
        memopt.optimize(skipping, batch(), blocks=skipping.layers, repeat=1, progress=False)

    class TupleBlock(Block):
        def forward(self, x, mask):
            return (super().forward(x, mask),)

    class TupleTransformer(Transformer):
        def forward(self, ids):
            mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
            x = self.emb(ids)
            for layer in self.layers:
                x = layer(x, mask)[0]
            return self.head(x)

    tupled = TupleTransformer()
    tupled.layers = nn.ModuleList(TupleBlock() for _ in range(2))
    with pytest.raises(TypeError, match="returned tuple; the blocks of a stack return their hidden states as one"):
        memopt.optimize(tupled, batch(), blocks=tupled.layers, repeat=1, progress=False)

    with pytest.raises(TypeError, match="blocks= is not a module of this model"):
        memopt.optimize(model(), batch(), blocks=model().layers, repeat=1, progress=False)
    with pytest.raises(TypeError, match="not chain-shaped .* blocks="):
        memopt.optimize(model(), batch(), repeat=1, progress=False)
    with pytest.raises(ValueError, match=r"made for inputs of shape \(2, 24\), got \(1, 24\)"):
        net(batch()[:1])


class ScaledBlock(Block):
    """Saves a buffer of its own for backward (x * scale): a buffer never moves."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((C,), 0.5))

    def forward(self, x, mask):
        return super().forward(x, mask) * self.scale


def test_buffers_saved_inside_blocks_stay_when_saved_state_moves():
    plain = model(layers=4)
    plain.layers = nn.ModuleList(ScaledBlock() for _ in range(4))
    torch.manual_seed(3)
    for p in plain.layers.parameters():
        p.data.normal_(0, 0.05)
    inner = copy.deepcopy(plain)
    net = memopt.optimize(inner, batch(), budget="70%", link="1GB/s", blocks=inner.layers, repeat=1, progress=False)
    assert "offload_saved" in [op[0] for op in net.plan.schedule["ops"]]
    for seed in (21, 22):
        ref, _ = step(plain, batch(), seed)
        out, _ = step(net, batch(), seed)
        assert torch.equal(out, ref)
        assert_same_grads(inner, plain)


def test_stacks_memopt_cannot_cut_are_refused_by_name():
    repeated = model()
    repeated.layers = nn.ModuleList([repeated.layers[0], repeated.layers[1], repeated.layers[0]])
    with pytest.raises(TypeError, match="block 2 is its block 0"):
        memopt.optimize(repeated, batch(), blocks=repeated.layers, repeat=1, progress=False)

    normed = model()
    normed.norm = nn.BatchNorm1d(T)  # over positions: runs, and keeps running statistics
    with pytest.raises(TypeError, match=r"Transformer\.norm \(BatchNorm1d\) keeps running statistics outside the"):
        memopt.optimize(normed, batch(), blocks=normed.layers, repeat=1, progress=False)

    m = model()
    net = memopt.optimize(m, batch(), budget="min", blocks=m.layers, repeat=1, progress=False)
    out = net(batch())
    with pytest.raises(ValueError, match="a forward while the previous step's backward is still to come"):
        net(batch())
    out.sum().backward()
    net(batch()).sum().backward()

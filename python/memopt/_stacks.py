"""How any PyTorch model that is a stack of blocks -- a user's own transformer, say --
becomes memopt's chain, with no change to its code: what its forward does before the
blocks, each block, and what it does after them.

Note [Cutting a stack of blocks]
The model's forward takes one tensor and returns one tensor, the caller's loss comes
after it, and somewhere in it every block of one nn.ModuleList runs once, in order,
as h = block(h, ...) with the hidden states as its first argument and a tensor as its
result. memopt cuts it into three kinds of stage, each running the model's own code:
  - "before": the forward up to the first block, which stops it;
  - "blocks.i": block i, called with the other arguments the forward gave it. Those
    (a mask, position tables) are the step's inputs: made once per step by prepare(),
    which runs the forward without grad with every block replaced by a recorder, the
    RNG forked around it so that it draws nothing;
  - "after": the forward from the last block on. Python cannot start a function in its
    middle, so this stage runs the whole forward again with the first block handing
    over this stage's input and the other blocks passing it on. What comes before the
    first block runs again, without grad and with the generators put back where they
    were when it started, so that the rest draws exactly the masks it draws in the
    model's own forward. That costs the "before" stage's time a second time, no memory
    that lasts, and is in the profile's times.
A forward that uses, after its blocks, something computed before them (a skip from the
embedding to the head) would lose that gradient in the "after" stage. So before a plan
is made, the chain's output and the parameters' gradients are compared with the
model's own, dropout off; any difference refuses the model, never trains it wrongly.
"""
from typing import Callable, List, Optional

import torch
from torch import nn

from ._chains import ChainSpec
from ._blocks import (check_distinct, record_block_args, replaced_forwards, split_hidden, tensors_in,
                      train_flags_kept, until_first_block)


class _Generators:
    """The CPU's and, on a GPU, the device's generator states, to put back later."""

    def __init__(self, x: torch.Tensor):
        self.cuda = x.device if x.device.type == "cuda" else None
        self.cpu = torch.get_rng_state()
        self.device = torch.cuda.get_rng_state(self.cuda) if self.cuda is not None else None

    def restore(self):
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.device, self.cuda)


class StackStages:
    """The stage functions of a model cut at its blocks (Note [Cutting a stack of
    blocks]) and the step's inputs its blocks read, made by prepare()."""

    def __init__(self, model: nn.Module, blocks: nn.ModuleList):
        if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
            raise TypeError("memopt: blocks= must be a non-empty nn.ModuleList of the model's blocks")
        if not any(m is blocks for m in model.modules()):
            raise TypeError("memopt: blocks= is not a module of this model")
        check_distinct(blocks, type(model).__name__)
        self.model = model
        self.blocks = blocks
        self.block_args: List[tuple] = []
        self.input: Optional[torch.Tensor] = None

    def prepare(self, x: torch.Tensor, attention_mask=None, loss_kwargs=None):
        """Records what the model's forward passes each block for this input."""
        self.input = x
        self.block_args = record_block_args(self.blocks, lambda: self.model(x), x, type(self.model).__name__)

    def step_inputs(self) -> List[torch.Tensor]:
        return tensors_in(self.block_args)

    def before(self, x, targets):
        return until_first_block(self.blocks, lambda: self.model(x), type(self.model).__name__)

    def block(self, i: int) -> Callable:
        block = self.blocks[i]

        def forward(hidden_states, targets):
            rest, kwargs = self.block_args[i]
            out = block(hidden_states, *rest, **kwargs)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"memopt: block {i} ({type(block).__name__}) returned {type(out).__name__}; the "
                                f"blocks of a stack return their hidden states as one tensor")
            return out
        return forward

    def after(self, hidden_states, targets):
        grad = torch.is_grad_enabled()
        generators = _Generators(hidden_states)

        def hand_over(i):
            def forward(*args, **kwargs):
                if i == 0:  # what came before ran without grad and drew nothing that counts
                    torch.set_grad_enabled(grad)
                    generators.restore()
                    return hidden_states
                return split_hidden(args, kwargs)[0]
            return forward
        with torch.no_grad(), replaced_forwards(self.blocks, hand_over):
            out = self.model(self.input)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"memopt: {type(self.model).__name__}'s forward returned {type(out).__name__}; a stack "
                            f"of blocks returns one tensor, which the caller's loss reads")
        return out


def _run_chain(forwards, x):
    for forward in forwards:
        x = forward(x, None)
    return x


def _stage_parameters(model: nn.Module, stages: StackStages, x: torch.Tensor):
    """Each parameter's stage: the blocks' own, and the rest to "before" or "after" by
    which of the two ran the module that holds it with grad (the first, if both)."""
    ran = {"before": [], "after": []}
    current = ["before"]

    def note(module, args):
        if torch.is_grad_enabled():
            ran[current[0]].append(module)
    in_blocks = {id(p) for b in stages.blocks for p in b.parameters()}
    handles = [m.register_forward_pre_hook(note) for m in model.modules() if not any(m is b for b in stages.blocks)]
    try:
        h = stages.before(x, None)
        current[0] = "after"
        stages.after(h.detach(), None)
    finally:
        for handle in handles:
            handle.remove()
    seen = set(in_blocks)
    out = {}
    for where in ("before", "after"):
        out[where] = []
        for module in ran[where]:
            for p in module.parameters(recurse=False):
                if id(p) not in seen:
                    seen.add(id(p))
                    out[where].append(p)
    out["before"] += [p for p in model.parameters() if id(p) not in seen]  # never run: anywhere will do
    return out["before"], [list(b.parameters()) for b in stages.blocks], out["after"]


def _same(a: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> bool:
    """Equal, bit for bit on the CPU; on a GPU, whose backward kernels may add in any
    order, equal to rounding: what the check looks for is a gradient lost, not a bit."""
    if a is None or b is None:
        return a is None and b is None
    if a.device.type == "cpu":
        return torch.equal(a, b)
    return torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def check_stack_cut(model: nn.Module, stages: "StackStages", forwards: List[Callable], x: torch.Tensor):
    """The chain's output and the parameters' gradients equal the model's own, dropout
    off, or the model is refused (Note [Cutting a stack of blocks]). The outputs are
    compared without grad on the whole sample; the gradients, which need everything
    stored, on its first row only."""
    name = type(model).__name__
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in params]
    with train_flags_kept(model):
        model.eval()
        with torch.no_grad():
            own = model(x)
            if not isinstance(own, torch.Tensor):
                raise TypeError(f"memopt: {name}'s forward returned {type(own).__name__}; a stack of blocks returns "
                                f"one tensor, which the caller's loss reads")
            chained = _run_chain(forwards, x)
        if own.shape != chained.shape or not _same(own, chained):
            raise TypeError(f"memopt: {name} cut at its blocks does not reproduce its own forward; memopt cuts "
                            f"models whose forward runs what comes before the blocks, the blocks in order (h = "
                            f"block(h, ...)), then what comes after them (docs/python.md, 'Which models')")
        row = x[:1]
        try:
            def grads(run):
                for _, p in params:
                    p.grad = None
                out = run()
                weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(0)).to(out)
                (out * weights).sum().backward()
                return [p.grad for _, p in params]
            own_grads = grads(lambda: model(row))
            stages.prepare(row)
            chained_grads = grads(lambda: _run_chain(forwards, row))
        finally:
            stages.prepare(x)
            for (_, p), g in zip(params, saved):
                p.grad = g
    differ = [n for (n, _), a, b in zip(params, own_grads, chained_grads) if not _same(a, b)]
    if differ:
        raise TypeError(f"memopt: {name} cut at its blocks gives other gradients for {', '.join(differ[:3])}: its "
                        f"forward uses, after the blocks, something made before them (a skip around the blocks), "
                        f"or its blocks read a tensor made from parameters before them (which memopt makes once "
                        f"per step, without grad); a chain of stages carries neither")


def _refuse_running_statistics(model: nn.Module, blocks: nn.ModuleList):
    """The stages run what comes before the blocks more than once per step (Note
    [Cutting a stack of blocks]); a module that updates running statistics there
    would count each batch several times."""
    inside = {id(m) for b in blocks for m in b.modules()}
    for name, m in model.named_modules():
        if id(m) not in inside and getattr(m, "track_running_stats", False) and m.training:
            raise TypeError(f"memopt: {type(model).__name__}.{name} ({type(m).__name__}) keeps running statistics "
                            f"outside the blocks, which memopt's stages would update more than once per step; "
                            f"put it in eval mode or inside a block")


def stack_chain(model: nn.Module, sample: torch.Tensor, blocks: nn.ModuleList) -> ChainSpec:
    if not isinstance(sample, torch.Tensor):
        raise TypeError(f"memopt.optimize: a stack of blocks takes one tensor as its sample input, got "
                        f"{type(sample).__name__}")
    stages = StackStages(model, blocks)
    _refuse_running_statistics(model, blocks)
    stages.prepare(sample)
    names = ["before"] + [f"blocks.{i}" for i in range(len(blocks))] + ["after"]
    forwards = [stages.before] + [stages.block(i) for i in range(len(blocks))] + [stages.after]
    check_stack_cut(model, stages, forwards, sample)
    before, inside, after = _stage_parameters(model, stages, sample)
    model_json = {"name": type(model).__name__, "n_layer": len(blocks), "input_shape": list(sample.shape),
                  "source": "a stack of blocks"}
    return ChainSpec(names, forwards, [before] + inside + [after], model, False, model_json, sample, None, stages)

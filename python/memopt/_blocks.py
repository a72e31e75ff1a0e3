"""What memopt does to a model's stack of blocks to cut its forward there, shared by
the causal LMs of transformers (_decoders.py) and any other stack (_stacks.py): run
the forward with the blocks' forwards replaced, to record what it passes each block,
or to stop it at the first block."""
import contextlib
from typing import Callable, List

import torch


class _Stop(Exception):
    """Raised by the first block to end the model's forward there."""

    def __init__(self, hidden_states):
        super().__init__()
        self.hidden_states = hidden_states


def split_hidden(args, kwargs):
    """The hidden states a block was given (first positional, or by name) and the rest."""
    if args:
        return args[0], args[1:], kwargs
    kwargs = dict(kwargs)
    return kwargs.pop("hidden_states"), (), kwargs


def check_distinct(blocks, name: str):
    """A block listed twice would run twice per forward: not a chain of stages."""
    for i, block in enumerate(blocks):
        for j in range(i):
            if blocks[j] is block:
                raise TypeError(f"memopt: {name}'s block {i} is its block {j}; memopt cuts stacks whose blocks are "
                                f"distinct modules")


@contextlib.contextmanager
def train_flags_kept(model):
    """Every module's training flag as it was after whatever runs inside (model.train()
    would set them all alike, undoing a submodule the user froze in eval mode)."""
    flags = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        for m, flag in flags:
            m.training = flag


@contextlib.contextmanager
def replaced_forwards(blocks, make):
    """Each block's forward replaced by make(i) while inside; the model's own after."""
    for i, block in enumerate(blocks):
        block.forward = make(i)
    try:
        yield
    finally:
        for block in blocks:
            del block.forward


def record_block_args(blocks, call: Callable[[], object], x: torch.Tensor, name: str) -> List[tuple]:
    """Per block, (positional args after the hidden states, kwargs) that call() -- the
    model's forward on x -- passes it: run without grad, each block handing its input
    on, the generators forked so that nothing is drawn, and stopped at the last block,
    so that what follows the blocks (a vocabulary head) costs nothing."""
    recorded = [None] * len(blocks)

    def recorder(i):
        def forward(*args, **kwargs):
            hidden, rest, kw = split_hidden(args, kwargs)
            recorded[i] = (rest, kw)
            if i == len(blocks) - 1:
                raise _Stop(hidden)
            return hidden
        return forward
    devices = [x.device] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad(), replaced_forwards(blocks, recorder):
        try:
            call()
        except _Stop:
            pass
    missing = [i for i, r in enumerate(recorded) if r is None]
    if missing:
        raise TypeError(f"memopt: {name}'s forward did not call blocks {missing}; memopt cuts models that run "
                        f"every block once, in order")
    return recorded


def tensors_in(block_args: List[tuple]) -> List[torch.Tensor]:
    """The tensors among recorded block arguments (inside tuples and lists too)."""
    return [t for rest, kwargs in block_args for v in list(rest) + list(kwargs.values())
            for t in (v if isinstance(v, (tuple, list)) else (v,)) if isinstance(t, torch.Tensor)]


# The model's forward is stopped by an exception, which Dynamo cannot trace: with
# compiled stages (Note [Compiled stages] in _compile.py) this part of the embedding
# stage runs eagerly, and none of the model's functions it calls is compiled apart.
@torch.compiler.disable
def until_first_block(blocks, call: Callable[[], object], name: str) -> torch.Tensor:
    """The hidden states call() -- the model's forward -- gives its first block."""
    def stop(i):
        def forward(*args, **kwargs):
            raise _Stop(split_hidden(args, kwargs)[0])
        return forward
    try:
        with replaced_forwards(blocks[:1], stop):
            call()
    except _Stop as s:
        return s.hidden_states
    raise TypeError(f"memopt: {name}'s forward never reached its first block")

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
    on, the generators forked so that nothing is drawn."""
    recorded = [None] * len(blocks)

    def recorder(i):
        def forward(*args, **kwargs):
            hidden, rest, kw = split_hidden(args, kwargs)
            recorded[i] = (rest, kw)
            return hidden
        return forward
    devices = [x.device] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad(), replaced_forwards(blocks, recorder):
        call()
    missing = [i for i, r in enumerate(recorded) if r is None]
    if missing:
        raise TypeError(f"memopt: {name}'s forward did not call blocks {missing}; memopt cuts models that run "
                        f"every block once, in order")
    return recorded


def tensors_in(block_args: List[tuple]) -> List[torch.Tensor]:
    """The tensors among recorded block arguments (inside tuples and lists too)."""
    return [t for rest, kwargs in block_args for v in list(rest) + list(kwargs.values())
            for t in (v if isinstance(v, (tuple, list)) else (v,)) if isinstance(t, torch.Tensor)]


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

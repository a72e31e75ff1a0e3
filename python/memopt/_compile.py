"""Each stage's forward compiled with torch.compile: memopt.optimize(compile_stages=True).

Note [Compiled stages]
A stage is a Python function of its input; memopt's executor calls it wherever the plan
runs that stage's forward, with autograd (fwd_keep) or without (fwd_ckpt, fwd_drop), and
autograd runs its backward. torch.compile of that function makes two graphs per stage,
one per grad mode (Dynamo guards on it), each with fused kernels, and an AOTAutograd
backward for the one with autograd. Nothing else changes: the profile measures the
compiled stages as they will run, the plan prices them, and saved-state offloading still
sees every tensor the compiled forward saves (AOTAutograd saves them through autograd,
where memopt's hooks take them). One part of one stage stays eager: a chunked head's
loss (Note [The chunked head is not compiled] in _chunked_loss.py).

Recomputation must draw the dropout masks the first forward drew. Inductor's own random
numbers come from seeds it draws from the generator, in its own order, per graph; the
grad and no-grad graphs of a stage need not draw them alike, and a recomputed stage runs
the other graph than the forward before the loss did when that forward was a checkpoint.
So the stages are compiled with inductor's fallback_random: every random op is ATen's,
drawing what eager PyTorch draws from the generator state memopt restores before it
recomputes. The masks are then those of the eager model too, so a step of compiled
stages computes what the eager model computes, up to the fused kernels' rounding.

Dynamo keeps its compiled graphs on the function's code object, a few per code object
(its recompile limit), and past that runs the function eagerly. The stages of a chain
are closures of one function (an nn.Sequential's children, a model's blocks), each
needing graphs of its own -- two per grad mode and batch shape -- so each stage is
compiled from a copy of its function with a code object of its own: a long or
heterogeneous chain never runs out of graphs, at the price of tracing identical blocks
once each (inductor's graph cache then finds their kernels already built). A batch of
another shape recompiles each stage once per grad mode; Dynamo then marks the shapes
dynamic.

Note [One code object per stage of a model]
A plan is made by building the chain again: a profile, then optimize() at each budget and
link, each a new set of stage closures. Were each compiled from a fresh copy of its code,
every plan's first step would trace all its stages again, although they compute what the
profile's stages computed. So a model keeps, per stage, the code object its stages were
first compiled from, and every later chain of that model compiles its stage from that one:
Dynamo finds the graphs it made for it, whose guards check that the closure's values
(the block, the step's mask and position ids) are still what the graph was traced on, and
traces again only what they reject. The code objects live as long as the model, and
another model (a copy for another plan) gets its own, so the few graphs Dynamo keeps per
code object are never shared among models. The table is kept beside the models, keyed
weakly, not on them: an attribute would travel with copy.deepcopy (which copies a code
object as itself, sharing it) and stop torch.save from pickling the model.
"""
import types
import weakref
from typing import Callable, Dict, Tuple

import torch

from ._chains import ChainSpec

# The profile's model/compiled when the stages were compiled (docs/formats.md).
COMPILED = "torch.compile"


# A model's stage code objects, by (the function's own code, stage index) (Note [One
# code object per stage of a model]).
StageCodes = Dict[Tuple[types.CodeType, int], types.CodeType]
_codes_of_model: "weakref.WeakKeyDictionary[object, StageCodes]" = weakref.WeakKeyDictionary()


def _function_copy(function: types.FunctionType, index: int, codes: StageCodes) -> types.FunctionType:
    key = (function.__code__, index)
    if key not in codes:
        codes[key] = function.__code__.replace(co_name=f"{function.__code__.co_name}_stage{index}")
    code = codes[key]
    copy = types.FunctionType(code, function.__globals__, code.co_name, function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _with_own_code(forward: Callable, index: int, codes: StageCodes) -> Callable:
    """`forward`, as a function whose code object is its stage's own (Note [Compiled stages])."""
    if isinstance(forward, types.MethodType) and isinstance(forward.__func__, types.FunctionType):
        return types.MethodType(_function_copy(forward.__func__, index, codes), forward.__self__)
    if isinstance(forward, types.FunctionType):
        return _function_copy(forward, index, codes)
    return forward


def compile_stage(forward: Callable, index: int, codes: StageCodes) -> Callable:
    return torch.compile(_with_own_code(forward, index, codes), options={"fallback_random": True})


def compile_forwards(spec: ChainSpec) -> ChainSpec:
    """`spec` with every stage's forward compiled (Note [Compiled stages]), from the code
    objects its model's earlier chains were compiled from (Note [One code object per
    stage of a model])."""
    codes = _codes_of_model.setdefault(spec.owner, {})
    spec.forwards = [compile_stage(f, i, codes) for i, f in enumerate(spec.forwards)]
    spec.model_json = dict(spec.model_json, compiled=COMPILED)
    return spec

"""memopt's Python API: profile, solve, simulate, and optimize, which does all three and
makes the model train along the plan. The profiler, solver, simulator and executor are
the C++ core's (memopt._core); JSON is the CLI's (docs/formats.md)."""
import contextlib
import gc
import json
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Dict, Optional, Union

import torch
from torch import nn

from . import _core
from ._chains import ChainSpec, hf_gpt2_chain, is_hf_gpt2, sequential_chain
from ._chunked_loss import CHUNKED, chunk_head
from ._compile import COMPILED, compile_forwards
from ._decoders import decoder_chain, find_blocks, is_hf_causal_lm
from ._stacks import stack_chain
from ._shapes import ShapeLaw, cut_sample, probe_shapes

InfeasibleBudget = _core.InfeasibleBudget
ProblemTooLarge = _core.ProblemTooLarge

# Note [One testbed allocator per process]
# On the CPU memopt measures bytes with a counting, caching CPU allocator (the CPU
# plays the GPU's memory). It is installed by its first use -- profiling a CPU model,
# or memopt.testbed -- and stays for the process, so that later tensors, plain
# training's and memopt's alike, are counted by it; the bytes allocated before it are
# not, which no measurement needs, since each counts from a baseline. A model on a GPU
# never installs it: there the caching allocator's requested bytes are the meter.


def _build_chain(model, sample_inputs, granularity, blocks=None, compile_stages=False,
                 chunked_loss=False) -> ChainSpec:
    spec = _chain_of(model, sample_inputs, granularity, blocks)
    for name, value in (("compile_stages", compile_stages), ("chunked_loss", chunked_loss)):
        if not isinstance(value, bool):
            raise TypeError(f"memopt: {name} must be True or False, got {type(value).__name__}")
    if chunked_loss:
        spec = chunk_head(spec, model)
    return compile_forwards(spec) if compile_stages else spec


def _chain_of(model, sample_inputs, granularity, blocks) -> ChainSpec:
    if is_hf_gpt2(model) and blocks is None:
        return hf_gpt2_chain(model, sample_inputs, granularity)
    if is_hf_causal_lm(model):
        return decoder_chain(model, sample_inputs, granularity, blocks)
    if isinstance(model, nn.Sequential):
        if granularity != "block" or blocks is not None:
            raise ValueError("memopt: an nn.Sequential's stages are its children: pass no granularity or blocks")
        return sequential_chain(model, sample_inputs)
    if _is_hf_model(model) and blocks is None:
        raise TypeError(f"memopt: {type(model).__name__} is a transformers model but not a causal LM with an output "
                        f"embedding and a loss; memopt takes transformers' causal LMs (docs/python.md, 'Which "
                        f"models'), or pass blocks= for a model whose forward returns one tensor")
    if blocks is not None or getattr(model, "_no_split_modules", None):
        if granularity != "block":
            raise ValueError(f"memopt.optimize: granularity '{granularity}' is for transformers' causal LMs; a "
                             f"stack of blocks is cut at its blocks (granularity='block')")
        return stack_chain(model, sample_inputs, blocks if blocks is not None else find_blocks(model))
    raise TypeError(f"memopt: {type(model).__name__} is not chain-shaped as memopt takes models: pass an "
                    f"nn.Sequential (one stage per child), a model that is a stack of blocks with blocks= (its "
                    f"nn.ModuleList of blocks), or a transformers causal LM (GPT-2, Llama, Mistral, Qwen, "
                    f"GPT-NeoX, Phi-3, or any other whose forward is embedding, blocks, final norm, output "
                    f"embedding and loss; docs/python.md, 'Which models')")


def _is_hf_model(model: nn.Module) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(model, PreTrainedModel)


def _check_devices(spec: ChainSpec) -> torch.device:
    """The one device the model and the sample live on, which memopt profiles and
    trains on: the CPU testbed, or a CUDA GPU when this build has the CUDA backend."""
    tensors = [("sample input", spec.sample_input), ("sample labels", spec.sample_targets)]
    named = list(spec.owner.named_parameters()) + list(spec.owner.named_buffers()) + tensors
    device = spec.sample_input.device
    for name, t in named:
        if t is not None and t.device != device:
            raise ValueError(f"memopt: tensor '{name}' is on {t.device} and the sample input on {device}; memopt "
                             f"plans a model on one device: move the model and the inputs to one device "
                             f"(model.to(device), inputs.to(device))")
    if device.type == "cuda" and not _core.cuda_built():
        raise ValueError(f"memopt: the model is on {device}, and this memopt package was built without the CUDA "
                         f"backend: build it against a CUDA torch (cmake --preset cuda, or pip install "
                         f"--no-build-isolation --no-deps . with CMAKE_ARGS=-DMEMOPT_CUDA=ON), or move the model "
                         f"and the inputs to the CPU")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"memopt: the model is on {device}; memopt plans for the CPU testbed and CUDA GPUs")
    return device


def _on(device: torch.device):
    """Makes `device` the current CUDA device, where memopt's core measures and copies
    (it takes the current device, as CUDA code does); nothing for the CPU."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _read_json(what, value):
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, (str, os.PathLike)):
        with open(value) as f:
            return f.read()
    raise TypeError(f"memopt: {what} must be a dict or the path of a JSON file, got {type(value).__name__}")


def _write_json(path, text):
    """Writes JSON text as the command line writes its files (same layout, atomically)."""
    if path is not None:
        _core.write_json(os.fspath(path), text)


def _progress_printer(enabled):
    """Says when profiling starts and ends, and how far it got every few seconds."""
    if not enabled:
        return None
    clock = {"start": 0.0, "last": 0.0}

    def show(done, total):
        now = time.monotonic()
        if done == 0:
            clock["start"] = clock["last"] = now
            print(f"[memopt] profiling {total} stages", file=sys.stderr, flush=True)
        elif done == total:
            print(f"[memopt] profiled {total} stages in {now - clock['start']:.1f} s", file=sys.stderr, flush=True)
        elif now - clock["last"] >= 5.0:
            clock["last"] = now
            print(f"[memopt] profiled {done}/{total} stages", file=sys.stderr, flush=True)
    return show


def _dtype_word(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _autocast_word(device: torch.device) -> Optional[str]:
    """The dtype the current thread autocasts `device`'s ops to, or None."""
    if not torch.is_autocast_enabled(device.type):
        return None
    return _dtype_word(torch.get_autocast_dtype(device.type))


def _check_autocast(plan: "Plan", device: torch.device):
    """A plan's bytes and times are those of the autocast it was profiled under: a step
    under another one would peak elsewhere than predicted."""
    planned, now = plan.profile.get("model", {}).get("autocast"), _autocast_word(device)
    if planned != now:
        raise ValueError(f"memopt: the plan was profiled {'under autocast to ' + planned if planned else 'without autocast'}"
                         f" and this step runs {'under autocast to ' + now if now else 'without autocast'}: call "
                         f"memopt.optimize inside the same torch.autocast(...) as the training step")


def _model_json(spec: ChainSpec) -> dict:
    """The profile's model object, with the parameters' dtype and, under autocast,
    the dtype the forward computes in (docs/formats.md, "The `model` object (GPT-2)")."""
    j = dict(spec.model_json)
    params = [p for stage in spec.parameters for p in stage]
    j["dtype"] = _dtype_word(params[0].dtype if params else spec.sample_input.dtype)
    autocast = _autocast_word(spec.sample_input.device)
    if autocast is not None:
        j["autocast"] = autocast
    return j


def _model_json_at(spec: ChainSpec, shape: tuple) -> str:
    """The profile's model object for a batch of `shape` (a language model's B x T)."""
    j = _model_json(spec)
    j["batch"], j["seq_len"] = shape
    return json.dumps(j)


@contextlib.contextmanager
def _grads_kept(module: nn.Module):
    """The parameters' .grad as they were after whatever runs inside (the profiler
    allocates, zeroes and frees gradients): what a training loop has accumulated when a
    batch of a new shape is profiled survives it. They are held, not copied, so the
    profile needs their bytes beside its own."""
    saved = [(p, p.grad) for p in module.parameters()]
    for p, _ in saved:
        p.grad = None
    try:
        yield
    finally:
        for p, g in saved:
            p.grad = g


@contextlib.contextmanager
def _measuring():
    """Python's garbage collector off while a profile measures (Note [No collection
    inside a measurement])."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Note [No collection inside a measurement]
# The profiler counts each stage's bytes as the change in what the device holds. A
# collection inside it -- of an optimized model the caller dropped, which is garbage
# like any other (Note [A chain holds its model weakly] in core_module.cpp) -- would
# free bytes that are not the stage's and make its count too small, or negative. So
# the collector is off while a profile runs (a collection before it would cost a
# fraction of a second per shape profiled, in a process that imported torch);
# reference counting still frees what the stages drop.
def _measured_profile(chain, inputs, targets, model_json: str, repeat, warmup, threads, on_progress) -> str:
    """The C++ profiler's JSON for `chain`, measured with the collector off (Note [No
    collection inside a measurement]): every profile the package makes is made here."""
    with _measuring():
        return _core.profile(chain, inputs, targets, model_json, repeat, warmup, threads, on_progress)


def _profile_chain(spec: ChainSpec, repeat, warmup, threads, progress):
    chain = _core.make_chain(spec)
    return chain, _measured_profile(chain, spec.sample_input, spec.sample_targets, json.dumps(_model_json(spec)),
                                    repeat, warmup, threads, _progress_printer(progress))


def profile(model: nn.Module, sample_inputs, granularity: str = "block", out=None, repeat: int = 5,
            warmup: int = 1, threads: int = 1, progress: bool = True, blocks: Optional[nn.ModuleList] = None,
            compile_stages: bool = False, chunked_loss: bool = False) -> dict:
    """Measures every stage of `model` on `sample_inputs` (time, output, saved and
    temporary bytes) and returns the profile, the JSON `memopt profile` writes; with
    `out`, also writes it there. compile_stages, chunked_loss: as optimize's."""
    spec = _build_chain(model, sample_inputs, granularity, blocks, compile_stages, chunked_loss)
    with _on(_check_devices(spec)):
        _, text = _profile_chain(spec, repeat, warmup, threads, progress)
    _write_json(out, text)
    return json.loads(text)


def _with_link(profile_text: str, link: Optional[str]) -> str:
    if link is None:
        return profile_text
    if not isinstance(link, str):
        raise TypeError(f"memopt: link must be None, 'none', 'measured', a bandwidth such as '16GB/s' or an "
                        f"emulated GPU link such as 'h100-sxm:pcie5', got {type(link).__name__}")
    if link == "measured":
        return _core.set_measured_link(profile_text)
    return _core.set_link(profile_text, link)


def _check_profile_matches(profile: dict, spec: ChainSpec):
    names = [stage.get("name") for stage in profile.get("stages", [])]
    if names != spec.names:
        raise ValueError(f"memopt.optimize: the profile's stages ({len(names)}: {', '.join(map(str, names[:3]))}, ...) "
                         f"are not this model's ({len(spec.names)}: {', '.join(spec.names[:3])}, ...); profile "
                         f"this model (profile=None)")
    for key in ("batch", "seq_len", "input_shape"):
        if key in spec.model_json and profile.get("model", {}).get(key) != spec.model_json[key]:
            raise ValueError(f"memopt.optimize: the profile's model/{key} is {profile['model'].get(key)}, the "
                             f"sample's {spec.model_json[key]}; profile this sample (profile=None)")
    # What a profile was made of that the stages must be made of too: (the optimize flag,
    # whether a model object says it, what it is when it does and when it does not).
    made = profile.get("model", {})
    for flag, says, kinds in (
            ("compile_stages", lambda m: m.get("compiled") == COMPILED, ("compiled stages", "eager stages")),
            ("chunked_loss", lambda m: m.get("loss") == CHUNKED, ("a chunked head", "the model's own head"))):
        if says(spec.model_json) != says(made):
            raise ValueError(f"memopt.optimize: the profile measured {kinds[not says(made)]} and these are "
                             f"{kinds[not says(spec.model_json)]}: pass {flag}={says(made)} as when the profile "
                             f"was made, or profile again (profile=None)")


def solve(profile, budget: Union[str, int], solver: str = "optimal", link: Optional[str] = None,
          slots: int = 500, threads: int = 0, out=None) -> dict:
    """The fastest schedule of `solver` that fits `budget` ("8GiB", "60%" of the
    store-all peak, a byte count, or "min") on a profile (a dict or a profile.json
    path), with the profile's link or `link`. Returns the schedule JSON `memopt solve
    --out` writes; with `out`, also writes it there."""
    text = _read_json("profile", profile)
    text = _with_link(text, link)
    schedule = _core.solve(text, str(budget), solver, slots, threads)
    _write_json(out, schedule)
    return json.loads(schedule)


def simulate(profile, schedule) -> dict:
    """The simulator's verdict on a schedule for a profile (dicts or paths): peak_bytes,
    time_ms, fits (its budget), copy_ms, stall_ms, store_all_peak_bytes. Raises
    ValueError naming the op when the schedule is not valid for the profile."""
    return json.loads(_core.simulate(_read_json("profile", profile), _read_json("schedule", schedule)))


@dataclass
class Plan:
    """What optimize chose: the profile and schedule (the CLI's JSON) and the
    simulator's prediction for one training step."""
    profile: dict
    schedule: dict
    predicted: dict

    @property
    def budget_bytes(self) -> int:
        return self.schedule["budget_bytes"]

    def save(self, directory):
        """Writes profile.json and schedule.json, which `memopt simulate` and `memopt
        run` read."""
        os.makedirs(directory, exist_ok=True)
        _write_json(os.path.join(directory, "profile.json"), json.dumps(self.profile))
        _write_json(os.path.join(directory, "schedule.json"), json.dumps(self.schedule))


class OptimizedModel(nn.Module):
    """A model whose loss the caller computes -- a stack of blocks -- training along a
    memopt schedule: under autograd, forward returns the output after the schedule's
    forward part and backward runs the rest; without grad it is the model's own
    forward. The model is at `.module`, the plan at `.plan`."""

    def __init__(self, module: nn.Module, runner, plan: Plan, shape: tuple, spec: ChainSpec, name: str = "module"):
        super().__init__()
        setattr(self, name, module)
        self._name = name
        self.plan = plan
        self._runner = runner
        self._shape = shape
        self._spec = spec  # the runner's chain holds it weakly (Note [A chain holds its model weakly] in
        # python/core_module.cpp)
        # A stage may save a buffer of the model for backward; like a parameter it is
        # never moved (the list is taken once, not each step).
        self._buffers = list(module.buffers())

    def forward(self, x):
        module = getattr(self, self._name)
        if not torch.is_grad_enabled():
            return module(x)
        if tuple(x.shape) != self._shape:
            raise ValueError(f"memopt: the plan was made for inputs of shape {self._shape}, got {tuple(x.shape)}; "
                             f"a plan of a model whose loss the caller computes holds for its sample's shape: "
                             f"optimize with a sample of this shape")
        _check_autocast(self.plan, x.device)
        with _on(x.device):
            stages = self._spec.stages
            if stages is None:
                return self._runner.run(x, None)
            if self._runner.in_flight():
                raise ValueError(_IN_FLIGHT)
            stages.prepare(x)
            return self._runner.run(x, None, stages.step_inputs() + self._buffers)


class OptimizedSequential(OptimizedModel):
    """An nn.Sequential that trains along a memopt schedule (OptimizedModel); the
    Sequential is at `.seq`."""

    def __init__(self, seq: nn.Sequential, runner, plan: Plan, shape: tuple, spec: ChainSpec):
        super().__init__(seq, runner, plan, shape, spec, name="seq")


# Frames between a warning in _ShapePlans._make and the user's call of the model:
# _make, get, _LMForward.__call__, and nn.Module's two call wrappers.
_CALLER = 6

_IN_FLIGHT = ("memopt: a forward while the previous step's backward is still to come; the stages read one step's "
              "inputs (the mask, position tables, the loss's arguments) when they recompute, so call backward (or "
              "drop that loss) before the next forward")


class _ShapePlans:
    """A language model's plans, one per batch shape, all under the byte budget of the
    sample's plan (Note [How a profile scales with the batch shape]): a new shape's
    profile comes from the shape law, or, where the model keeps none, from profiling
    that shape on its first batch."""

    def __init__(self, chain, spec: ChainSpec, sample_profile: dict, link: Optional[str], solver: str, slots: int,
                 measure: dict):
        self.chain = chain
        self.spec = spec  # the chain holds it weakly (Note [A chain holds its model weakly] in core_module.cpp)
        self.link_word = "none" if link is None else link
        self.measured_link = sample_profile.get("link")  # link="measured": measured once, for every shape
        self.solver = solver
        self.slots = slots
        self.measure = measure          # repeat, warmup, threads for profiling a shape
        self.by_shape: Dict[tuple, tuple] = {}  # shape -> (runner, plan)
        self.law: Optional[ShapeLaw] = None
        self.why_no_law: Optional[str] = "optimize(..., other_shapes=False) planned the sample's shape only"
        self.sample_only = True
        self.budget_bytes = 0

    def add(self, shape, runner, plan: Plan):
        self.by_shape[shape] = (runner, plan)
        self.budget_bytes = self.budget_bytes or plan.budget_bytes

    def probe(self, sample_profile: dict, repeat: int, warmup: int, threads: int):
        """Profiles the probe shapes and fits the law, or records why there is none."""
        ids, labels = self.spec.sample_input, self.spec.sample_targets
        shape = tuple(ids.shape)
        self.sample_only = False
        shapes = probe_shapes(*shape)
        if shapes is None:
            self.why_no_law = f"the sample's {shape[1]} positions are too few to measure how bytes grow with T"
            return
        profiles = {shape: sample_profile}
        try:
            for s in shapes:
                profiles[s] = self._profile(cut_sample(ids, s), cut_sample(labels, s), repeat, warmup, threads)
        except RuntimeError as e:  # out of memory above all: other shapes are then profiled when they come
            self.why_no_law = f"profiling the probe shape {s} failed ({e})"
            return
        finally:
            self.spec.stages.prepare(ids)
        try:
            self.law = ShapeLaw(profiles, shape)
            self.why_no_law = None
        except ValueError as e:
            self.why_no_law = f"its bytes do not follow the shape law ({e})"

    def _profile(self, input_ids, labels, repeat, warmup, threads) -> dict:
        """A profile of this batch's shape, leaving the generators and the parameters'
        gradients as they were."""
        devices = [input_ids.device] if input_ids.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), _grads_kept(self.spec.owner):
            self.spec.stages.prepare(input_ids)
            return json.loads(_measured_profile(self.chain, input_ids, labels,
                                                _model_json_at(self.spec, tuple(input_ids.shape)), repeat, warmup,
                                                threads, None))

    def get(self, input_ids: torch.Tensor, labels: torch.Tensor):
        """The runner and plan for this batch's shape, made on its first batch."""
        if any(runner.in_flight() for runner, _ in self.by_shape.values()):
            raise ValueError(_IN_FLIGHT)
        shape = tuple(input_ids.shape)
        if shape not in self.by_shape and self.sample_only:
            raise ValueError(f"memopt: the plan was made for input_ids of shape {tuple(self.spec.sample_input.shape)}, "
                             f"got {shape}, and optimize(..., other_shapes=False) planned that shape only: "
                             f"optimize with other_shapes=True (the default) or with a sample of this shape")
        if shape not in self.by_shape:
            self.add(shape, *self._make(shape, input_ids, labels))
        return self.by_shape[shape]

    def _make(self, shape, input_ids, labels):
        if self.law is not None and self.law.covers(shape):
            profile = self.law.profile_at(shape)
        else:
            why = self.why_no_law if self.law is None else \
                f"it is larger than the sample {self.law.sample} in rows or positions"
            warnings.warn(f"memopt: profiling a batch of shape {shape} for its own plan, because {why}; "
                          f"optimize() given the largest batch plans the others without profiling",
                          stacklevel=_CALLER)
            profile = self._profile(input_ids, labels, self.measure["repeat"], self.measure["warmup"],
                                    self.measure["threads"])
        profile.pop("link", None)
        if self.link_word == "measured":
            profile["link"] = self.measured_link
            profile_text = json.dumps(profile)
        else:  # an emulated link depends on the shape's times: emulated again
            profile_text = _with_link(json.dumps(profile), self.link_word)
        profile = json.loads(profile_text)
        try:
            schedule_text = _core.solve(profile_text, str(self.budget_bytes), self.solver, self.slots, 0)
        except InfeasibleBudget as e:
            raise InfeasibleBudget(f"memopt: a batch of shape {shape} does not fit the budget of {self.budget_bytes} "
                                   f"bytes that optimize() resolved on the sample ({e}); optimize with a budget in "
                                   f"bytes that fits the largest batch, or with that batch as the sample") from e
        plan = Plan(profile, json.loads(schedule_text), json.loads(_core.simulate(profile_text, schedule_text)))
        return _core.Runner(self.chain, profile_text, schedule_text), plan


class _LMForward:
    """A language model's forward for training with labels: the whole step along the
    schedule for the batch's shape, returning the loss (logits stay inside the head
    stage: None). Anything else -- no labels, no grad, generation -- goes to the
    model's own forward. Its keywords are what Hugging Face's Trainer passes too."""

    def __init__(self, model, spec: ChainSpec, plans: _ShapePlans):
        self.original = type(model).forward.__get__(model)
        self.name = type(model).__name__
        self.stages = spec.stages
        self.plans = plans
        self.device = spec.sample_input.device
        # A stage may save a buffer of the model for backward; like a parameter it is
        # never moved.
        self.buffers = list(model.buffers())

    def __call__(self, input_ids=None, labels=None, attention_mask=None, return_dict=None, use_cache=None,
                 **kwargs):
        if labels is None or not torch.is_grad_enabled():
            return self.original(input_ids=input_ids, labels=labels, attention_mask=attention_mask,
                                 return_dict=return_dict, use_cache=use_cache, **kwargs)
        # Hugging Face's Trainer normalizes the loss by the tokens of all micro-batches.
        loss_kwargs = {k: kwargs.pop(k) for k in ("num_items_in_batch",) if kwargs.get(k) is not None}
        given = [k for k in kwargs if kwargs[k] is not None and k not in ("output_attentions", "output_hidden_states")]
        if given or input_ids is None:
            what = ", ".join(given) if given else "inputs_embeds without input_ids"
            raise ValueError(f"memopt: the optimized {self.name} trains on input_ids, labels and attention_mask; "
                             f"got {what}. memopt.unoptimize(model) restores the model's own forward")
        if input_ids.device != self.device:
            raise ValueError(f"memopt: input_ids is on {input_ids.device}; the plan was made for the model on "
                             f"{self.device}: move the batch there")
        if tuple(labels.shape) != tuple(input_ids.shape):
            raise ValueError(f"memopt: labels of shape {tuple(labels.shape)} for input_ids of shape "
                             f"{tuple(input_ids.shape)}; a causal LM's labels are one per input position")
        with _on(self.device):
            runner, plan = self.plans.get(input_ids, labels)
            _check_autocast(plan, self.device)
            self.stages.prepare(input_ids, attention_mask, loss_kwargs)
            loss = runner.run(input_ids, labels, self.stages.step_inputs() + self.buffers)
        if return_dict is False:
            return (loss,)
        from transformers.modeling_outputs import CausalLMOutputWithPast
        return CausalLMOutputWithPast(loss=loss, logits=None)


def optimize(model: nn.Module, sample_inputs, budget: Union[str, int] = "100%", link: Optional[str] = None,
             granularity: str = "block", solver: str = "optimal", slots: int = 500, threads: int = 1,
             repeat: int = 5, warmup: int = 1, progress: bool = True, save=None, profile=None,
             blocks: Optional[nn.ModuleList] = None, other_shapes: bool = True, compile_stages: bool = False,
             chunked_loss: bool = False):
    """Profiles `model` on `sample_inputs`, solves for `budget` and makes the model
    train along the plan. Returns the model to train: for a causal LM (GPT-2, Llama,
    ...) the same object, whose forward with labels now runs the plan
    (memopt.unoptimize undoes it); for an nn.Sequential an OptimizedSequential around
    it, for another stack of blocks an OptimizedModel (both: the caller computes the
    loss from the output). The plan is at `.plan` (those two) or `.memopt_plan` (a
    causal LM, whose plans for other batch shapes are at `.memopt_plans`).

      budget       "8GiB", "3.5GB", a byte count, "60%" of storing everything, or "min"
                   (resolved to bytes on the sample; every batch shape keeps those bytes)
      link         None (the profile has none: recomputation only), "measured" (the
                   copy engine's own link, measured now: a GPU's pinned PCIe or
                   NVLink-C2C), a bandwidth "16GB/s", or an emulated GPU link
                   "h100-sxm:pcie5" (GPT-2 only)
      granularity  "block" or "sublayer" (GPT-2's attention and MLP halves)
      threads      compute threads while profiling (1: the testbed's one stream)
      repeat       measured runs per stage (their median); warmup: unmeasured ones
      progress     say on stderr how profiling goes
      save         a folder for profile.json and schedule.json
      profile      a profile of this model and sample shape made earlier (a dict or a
                   path, e.g. a plan's .profile): used instead of profiling again
      blocks       the model's stack of blocks (an nn.ModuleList): for a causal LM that
                   does not name its block class in _no_split_modules, or for any model
                   whose forward is what comes before the blocks, the blocks, what comes
                   after them (Note [Cutting a stack of blocks])
      other_shapes a causal LM: also profile six smaller shapes, so that a batch of
                   another shape gets its own plan in a fraction of a second (Note [How
                   a profile scales with the batch shape]); give the largest batch the
                   training sees. False: other shapes are refused
      compile_stages  compile each stage's forward with torch.compile, so that the
                   stages run fused kernels; the profile times them compiled and the
                   plan prices them so (Note [Compiled stages] in _compile.py)
      chunked_loss a causal LM: compute the output embedding and Hugging Face's loss a
                   chunk of rows at a time, so that the B x T x V logits never exist at
                   once and the head no longer sets the smallest budget (Note [A
                   chunked head] in _chunked_loss.py); equal to the model's loss up to
                   rounding
    """
    spec = _build_chain(model, sample_inputs, granularity, blocks, compile_stages, chunked_loss)
    device = _check_devices(spec)
    with _on(device):
        if profile is None:
            chain, profile_text = _profile_chain(spec, repeat, warmup, threads, progress)
        else:
            chain = _core.make_chain(spec)
            profile_text = _read_json("profile", profile)
            _check_profile_matches(json.loads(profile_text), spec)
        sample_profile = json.loads(profile_text)
        # None means no link here, also on a reused profile that had one.
        profile_text = _with_link(profile_text, "none" if link is None else link)
        schedule_text = _core.solve(profile_text, str(budget), solver, slots, 0)
        plan = Plan(json.loads(profile_text), json.loads(schedule_text),
                    json.loads(_core.simulate(profile_text, schedule_text)))
        if save is not None:
            plan.save(save)
        runner = _core.Runner(chain, profile_text, schedule_text)
        if isinstance(model, nn.Sequential):
            return OptimizedSequential(model, runner, plan, tuple(spec.sample_input.shape), spec)
        if not spec.ends_with_loss:
            return OptimizedModel(model, runner, plan, tuple(spec.sample_input.shape), spec)
        plans = _ShapePlans(chain, spec, plan.profile, link, solver, slots,
                            {"repeat": repeat, "warmup": warmup, "threads": threads})
        plans.add(tuple(spec.sample_input.shape), runner, plan)
        if other_shapes:
            if progress:
                print("[memopt] profiling six smaller shapes, for batches of other shapes", file=sys.stderr,
                      flush=True)
            plans.probe(sample_profile, repeat, warmup, threads)
    model.forward = _LMForward(model, spec, plans)
    model.memopt_plan = plan
    model.memopt_plans = _PlansView(plans)
    return model


class _PlansView(Mapping):
    """model.memopt_plans: batch shape -> Plan, for every shape trained so far."""

    def __init__(self, plans: _ShapePlans):
        self._plans = plans

    def __getitem__(self, shape):
        return self._plans.by_shape[tuple(shape)][1]

    def __iter__(self):
        return iter(self._plans.by_shape)

    def __len__(self):
        return len(self._plans.by_shape)

    @property
    def law(self) -> Optional[ShapeLaw]:
        """How bytes and times scale with the shape, or None (why_no_law says why)."""
        return self._plans.law

    @property
    def why_no_law(self) -> Optional[str]:
        """Why there is no law (None when there is one)."""
        return self._plans.why_no_law


def unoptimize(model: nn.Module) -> nn.Module:
    """Gives an optimized causal LM back its own forward (an OptimizedSequential's
    model is `.seq`, an OptimizedModel's `.module`)."""
    if isinstance(model.__dict__.get("forward"), _LMForward):
        del model.forward
        del model.memopt_plan
        del model.memopt_plans
    return model

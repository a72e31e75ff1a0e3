"""How a PyTorch model becomes memopt's chain of stages a_i -> a_{i+1}.

Two kinds of model are chain-shaped as they are:
  - an nn.Sequential: one stage per child; its output is the chain's output and the
    loss is computed by the caller;
  - a Hugging Face GPT2LMHeadModel: embed, one stage per block (or its attention and
    MLP halves), and a head that computes the loss, as memopt's own GPT-2 is cut.

The GPT-2 stages call the model's own modules with the arguments its forward passes
them, op for op, so that a scheduled step computes what the plain forward computes
and draws dropout masks in the same order.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch
from torch import nn


@dataclass
class ChainSpec:
    names: List[str]
    forwards: List[Callable]          # forward(x, targets) -> tensor
    parameters: List[List[torch.Tensor]]
    owner: nn.Module                  # carries the train/eval flag
    ends_with_loss: bool
    model_json: dict                  # the profile's "model" object
    sample_input: torch.Tensor = None
    sample_targets: Optional[torch.Tensor] = None
    # A language model's stages (Gpt2Stages, DecoderStages): their prepare(input_ids,
    # attention_mask, loss_kwargs) makes the step's inputs before each step, which
    # step_inputs() lists (loss_kwargs: what the model's loss_function takes besides
    # logits and labels, such as the num_items_in_batch Hugging Face's Trainer
    # passes). None for a Sequential.
    stages: Optional[object] = field(default=None, repr=False)


def _own_parameters(module: nn.Module) -> List[torch.Tensor]:
    # The parameters themselves, not detached aliases: the profiler allocates their
    # .grad before it measures (Note [Stage byte accounting]).
    return list(module.parameters())


def sequential_chain(seq: nn.Sequential, sample: torch.Tensor) -> ChainSpec:
    if len(seq) == 0:
        raise ValueError("memopt.optimize: the nn.Sequential is empty; it needs at least one child")
    if not isinstance(sample, torch.Tensor):
        raise TypeError(f"memopt.optimize: an nn.Sequential's sample_inputs must be one tensor (its input), "
                        f"got {type(sample).__name__}")
    names, forwards, params = [], [], []
    for i, (name, child) in enumerate(seq.named_children()):
        names.append(f"{i}.{type(child).__name__}")
        forwards.append(_sequential_stage(i, name, child))
        params.append(_own_parameters(child))
    return ChainSpec(names, forwards, params, seq, False,
                     {"name": "sequential", "stages": len(names)}, sample, None)


def layer_stages(stages, blocks, granularity: str, prefix: str, halves_parameters: Callable):
    """The names, forwards and parameter lists of a language model's layers: a stage per
    layer, or (granularity "sublayer") its attention and MLP halves. `stages` has
    block(i), attention_half(i) and mlp_half(i); halves_parameters(block) gives the two
    halves' parameter lists."""
    names, forwards, params = [], [], []
    for i, block in enumerate(blocks):
        if granularity == "block":
            names.append(f"{prefix}.{i}")
            forwards.append(stages.block(i))
            params.append(_own_parameters(block))
        else:
            names += [f"{prefix}.{i}.attn", f"{prefix}.{i}.mlp"]
            forwards += [stages.attention_half(i), stages.mlp_half(i)]
            params += list(halves_parameters(block))
    return names, forwards, params


def _sequential_stage(index: int, name: str, child: nn.Module) -> Callable:
    def forward(x, targets):
        y = child(x)
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"memopt: stage {index} ({name}: {type(child).__name__}) returned "
                            f"{type(y).__name__}; stages of a chain pass one tensor from one to the next")
        return y
    return forward


def is_hf_gpt2(model: nn.Module) -> bool:
    try:
        from transformers import GPT2LMHeadModel
    except ImportError:
        return False
    return isinstance(model, GPT2LMHeadModel)


class Gpt2Stages:
    """The stage functions of a GPT2LMHeadModel, and the per-step values its forward
    derives from the batch (position ids and the attention mask) that every block reads.
    These are inputs of the step, like the labels, not activations of a stage."""

    def __init__(self, model: nn.Module, granularity: str):
        self.model = model
        self.granularity = granularity
        self.position_ids = None
        self.mask = None
        self.loss_kwargs = {}

    def prepare(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                loss_kwargs: Optional[dict] = None):
        from transformers.masking_utils import create_causal_mask
        self.loss_kwargs = loss_kwargs or {}
        tr = self.model.transformer
        batch, seq = input_ids.shape
        self.position_ids = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        if attention_mask is not None and attention_mask.ndim < 4:
            attention_mask = attention_mask.view(batch, -1)
        # The mask depends on the embeddings' shape, dtype and device only: a
        # broadcast view stands for them without allocating B x T x C.
        shape_of_embeds = torch.zeros((), dtype=tr.wte.weight.dtype, device=input_ids.device).expand(
            batch, seq, self.model.config.n_embd)
        self.mask = create_causal_mask(config=self.model.config, inputs_embeds=shape_of_embeds,
                                       attention_mask=attention_mask, past_key_values=None,
                                       position_ids=self.position_ids)

    def step_inputs(self) -> List[torch.Tensor]:
        """The tensors the stages read besides their input, made by prepare()."""
        return [t for t in (self.position_ids, self.mask, *self.loss_kwargs.values()) if isinstance(t, torch.Tensor)]

    def embed(self, input_ids, targets):
        tr = self.model.transformer
        inputs_embeds = tr.wte(input_ids)
        position_embeds = tr.wpe(self.position_ids)
        hidden_states = inputs_embeds + position_embeds.to(inputs_embeds.device)
        return tr.drop(hidden_states)

    def block(self, i: int) -> Callable:
        block = self.model.transformer.h[i]

        def forward(hidden_states, targets):
            out = block(hidden_states, None, self.mask, None, encoder_attention_mask=None, use_cache=None,
                        position_ids=self.position_ids)
            return out[0] if isinstance(out, tuple) else out
        return forward

    def attention_half(self, i: int) -> Callable:
        block = self.model.transformer.h[i]

        def forward(hidden_states, targets):
            residual = hidden_states
            hidden_states = block.ln_1(hidden_states)
            attn_output, _ = block.attn(hidden_states, past_key_values=None, attention_mask=self.mask,
                                        use_cache=None, position_ids=self.position_ids)
            return attn_output + residual
        return forward

    def mlp_half(self, i: int) -> Callable:
        block = self.model.transformer.h[i]

        def forward(hidden_states, targets):
            residual = hidden_states
            feed_forward_hidden_states = block.mlp(block.ln_2(hidden_states))
            return residual + feed_forward_hidden_states
        return forward

    def head_parts(self):
        """The final norm and the output embedding (Note [A chunked head] in _chunked_loss.py)."""
        return self.model.transformer.ln_f, self.model.lm_head

    def head(self, hidden_states, labels):
        hidden_states = self.model.transformer.ln_f(hidden_states)
        logits = self.model.lm_head(hidden_states)
        return self.model.loss_function(logits, labels, vocab_size=self.model.config.vocab_size, **self.loss_kwargs)


def hf_gpt2_chain(model: nn.Module, sample, granularity: str) -> ChainSpec:
    input_ids, labels = lm_sample(sample)
    cfg = model.config
    if getattr(cfg, "add_cross_attention", False):
        raise ValueError("memopt.optimize: GPT-2 with cross-attention (config.add_cross_attention) is not "
                         "chain-shaped: its blocks read the encoder's states too")
    renamed = hasattr(type(model), "is_activation_checkpointing")  # newer transformers' name
    if model.is_activation_checkpointing if renamed else getattr(model, "is_gradient_checkpointing", False):
        raise ValueError("memopt.optimize: Hugging Face gradient checkpointing is on; memopt chooses what to "
                         "recompute itself -- call model.gradient_checkpointing_disable() first")
    if granularity not in ("block", "sublayer"):
        raise ValueError(f"memopt.optimize: granularity '{granularity}' is not block or sublayer")
    stages = Gpt2Stages(model, granularity)
    tr = model.transformer
    names, forwards, params = layer_stages(
        stages, tr.h, granularity, "h",
        lambda b: (_own_parameters(b.ln_1) + _own_parameters(b.attn), _own_parameters(b.ln_2) + _own_parameters(b.mlp)))
    names, forwards = ["embed"] + names, [stages.embed] + forwards
    params = [_own_parameters(tr.wte) + _own_parameters(tr.wpe)] + params
    names.append("head")
    forwards.append(stages.head)
    params.append(_own_parameters(tr.ln_f) + _own_parameters(model.lm_head))
    attention = "sdpa" if cfg._attn_implementation == "sdpa" else "explicit"
    dropout = {"attn": cfg.attn_pdrop, "embd": cfg.embd_pdrop, "resid": cfg.resid_pdrop}
    if len(set(dropout.values())) == 1:
        dropout = cfg.resid_pdrop
    model_json = {
        "name": "gpt2", "n_layer": cfg.n_layer, "n_embd": cfg.n_embd, "n_head": cfg.n_head,
        "vocab": cfg.vocab_size, "seq_len": int(input_ids.shape[1]), "batch": int(input_ids.shape[0]),
        "dtype": "float32", "attention": attention, "dropout": dropout, "granularity": granularity,
        "kernels": "aten", "layer_norm_epsilon": cfg.layer_norm_epsilon, "loss": "aten",
        "n_positions": cfg.n_positions, "source": "transformers GPT2LMHeadModel",
    }
    stages.prepare(input_ids)
    return ChainSpec(names, forwards, params, model, True, model_json, input_ids, labels, stages)


def lm_sample(sample):
    """(input_ids, labels) from a tensor of token ids (labels = the ids, as in
    `model(input_ids=ids, labels=ids)`) or a dict with input_ids and optionally labels."""
    if isinstance(sample, torch.Tensor):
        input_ids, labels = sample, sample
    elif isinstance(sample, dict) and "input_ids" in sample:
        input_ids = sample["input_ids"]
        labels = sample.get("labels", input_ids)
        extra = sorted(set(sample) - {"input_ids", "labels"})
        if extra:
            raise ValueError(f"memopt.optimize: sample_inputs has {', '.join(extra)}; a language model is profiled on "
                             f"input_ids and labels only")
    else:
        raise TypeError("memopt.optimize: a language model's sample_inputs must be a tensor of token ids or a dict "
                        "with 'input_ids' (and optionally 'labels')")
    if input_ids.dtype != torch.long or input_ids.ndim != 2:
        raise ValueError(f"memopt.optimize: input_ids must be a B x T tensor of int64 token ids, got "
                         f"{input_ids.dtype} of shape {tuple(input_ids.shape)}")
    return input_ids, labels

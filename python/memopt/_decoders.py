"""How a Hugging Face decoder LM (Llama, Mistral, Qwen2, Qwen3, GPT-NeoX, Phi3, and any
causal LM built the same way) becomes memopt's chain, without a line of its code changed.

Note [Cutting a decoder at its blocks]
A decoder's forward is: the embedding (and whatever the model does to it), then the
step's inputs every block reads -- the causal mask from the model's own mask function,
position ids, rotary position embeddings -- then the blocks, then a final norm, the
output head and the model's own loss. memopt cuts it there:
  - the step's inputs are made once per step, never an activation: the decoder's own
    forward runs with every block replaced by a recorder that keeps the arguments the
    forward passes that block and hands its input on; the RNG is forked around it, so
    it draws nothing (an embedding dropout draws only in the embed stage);
  - the embed stage runs the decoder's own forward up to the first block (which stops
    it), so whatever a model does before its blocks is done as the model does it;
  - each block stage calls the block with the arguments the forward gave it;
  - the head stage is the final norm, the output embedding and model.loss_function, the
    three pieces every causal LM of transformers applies after its blocks.
Before a plan is made, the chain's loss on the sample is compared with the model's own
forward, dropout off: a model whose cut does not reproduce its forward exactly is
refused, naming what differs, never trained wrongly.
"""
from typing import Callable, List, Optional

import torch
from torch import nn

from ._blocks import check_distinct, record_block_args, tensors_in, train_flags_kept, until_first_block
from ._chains import ChainSpec, _own_parameters, lm_sample, layer_stages

# The names transformers gives the norm applied after the blocks.
_FINAL_NORMS = ("norm", "final_layer_norm", "ln_f", "final_layernorm")


def find_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's stack of blocks: the ModuleList whose children are all of one of the
    classes the model names in _no_split_modules (what FSDP's auto-wrap uses)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    if not names:
        raise TypeError(f"memopt: {type(model).__name__} names no block class in _no_split_modules; pass "
                        f"blocks= (the nn.ModuleList of its blocks)")
    found = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0
             and all(type(child).__name__ in names for child in m)]
    if len(found) != 1:
        raise TypeError(f"memopt: {type(model).__name__} has {len(found)} lists of its blocks "
                        f"({', '.join(sorted(names))}); pass blocks= (the nn.ModuleList of its blocks)")
    return found[0]


def _parent_of(model: nn.Module, child: nn.Module) -> nn.Module:
    for module in model.modules():
        if any(c is child for c in module.children()):
            return module
    raise TypeError("memopt: blocks= is not a module of this model")


def is_hf_causal_lm(model: nn.Module) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(model, PreTrainedModel) and hasattr(model, "get_decoder") and \
        hasattr(model, "loss_function") and model.get_output_embeddings() is not None


class DecoderStages:
    """The stage functions of a causal LM cut at its blocks (Note [Cutting a decoder at
    its blocks]), and the step's inputs the blocks read, made by prepare()."""

    def __init__(self, model: nn.Module, blocks: nn.ModuleList):
        self.model = model
        self.blocks = blocks
        check_distinct(blocks, type(model).__name__)
        self.decoder = _parent_of(model, blocks)
        norms = [getattr(self.decoder, n) for n in _FINAL_NORMS if isinstance(getattr(self.decoder, n, None), nn.Module)]
        if len(norms) != 1:
            raise TypeError(f"memopt: cannot tell {type(self.decoder).__name__}'s final norm (looked for "
                            f"{', '.join(_FINAL_NORMS)}); memopt cuts causal LMs whose blocks are followed by one "
                            f"norm, the output embedding and the loss")
        self.norm = norms[0]
        self.head_module = model.get_output_embeddings()
        self.block_args: List[tuple] = []  # per block: (positional args after the hidden states, kwargs)
        self.attention_mask = None
        self.loss_kwargs = {}

    def _decoder_call(self, input_ids):
        return self.decoder(input_ids=input_ids, attention_mask=self.attention_mask, use_cache=False)

    def prepare(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                loss_kwargs: Optional[dict] = None):
        """Records what the model's forward passes each block for this batch."""
        self.attention_mask = attention_mask
        self.loss_kwargs = loss_kwargs or {}
        self.block_args = record_block_args(self.blocks, lambda: self._decoder_call(input_ids), input_ids,
                                            type(self.decoder).__name__)

    def step_inputs(self) -> List[torch.Tensor]:
        """The tensors the blocks read besides their input, made by prepare(): the
        runner leaves them in place when it moves a stage's saved state."""
        return tensors_in(self.block_args) + [v for v in self.loss_kwargs.values() if isinstance(v, torch.Tensor)]

    def embed(self, input_ids, targets):
        return until_first_block(self.blocks, lambda: self._decoder_call(input_ids), type(self.decoder).__name__)

    def block(self, i: int) -> Callable:
        block = self.blocks[i]

        def forward(hidden_states, targets):
            rest, kwargs = self.block_args[i]
            out = block(hidden_states, *rest, **kwargs)
            return out[0] if isinstance(out, tuple) else out
        return forward

    # Note [Half blocks of a pre-norm decoder layer]
    # Llama's layer and its kin (Mistral, Qwen2, Qwen3, Phi-3) are two residual halves,
    # h + attn(norm1(h)) then h + mlp(norm2(h)), each half's output optionally through a
    # residual dropout (Phi-3's resid_attn_dropout, resid_mlp_dropout). A layer with
    # those four modules is cut there, its attention called with the keywords the
    # model's forward gave the layer; check_cut then confirms the halves reproduce the
    # model. GPT-NeoX's parallel residual has no such halves and is refused.
    _HALVES = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")

    def can_halve(self) -> bool:
        return all(isinstance(getattr(b, n, None), nn.Module) for b in self.blocks for n in self._HALVES) and \
            all(not rest for rest, _ in self.block_args)

    def attention_half(self, i: int) -> Callable:
        block = self.blocks[i]
        dropout = getattr(block, "resid_attn_dropout", None)

        def forward(hidden_states, targets):
            out = block.self_attn(hidden_states=block.input_layernorm(hidden_states), **self.block_args[i][1])
            out = out[0] if isinstance(out, tuple) else out
            return hidden_states + (dropout(out) if dropout is not None else out)
        return forward

    def mlp_half(self, i: int) -> Callable:
        block = self.blocks[i]
        dropout = getattr(block, "resid_mlp_dropout", None)

        def forward(hidden_states, targets):
            out = block.mlp(block.post_attention_layernorm(hidden_states))
            return hidden_states + (dropout(out) if dropout is not None else out)
        return forward

    def head_parts(self):
        """The final norm and the output embedding (Note [A chunked head] in _chunked_loss.py)."""
        return self.norm, self.head_module

    def head(self, hidden_states, labels):
        logits = self.head_module(self.norm(hidden_states))
        return self.model.loss_function(logits=logits, labels=labels, vocab_size=self.model.config.vocab_size,
                                        **self.loss_kwargs)


def _refused_options(model: nn.Module):
    """Options of a config memopt cannot honour, by name."""
    cfg = model.config
    if getattr(cfg, "is_encoder_decoder", False) or getattr(cfg, "add_cross_attention", False):
        raise ValueError("memopt.optimize: a model with cross-attention is not chain-shaped: its blocks read the "
                         "encoder's states too")
    renamed = hasattr(type(model), "is_activation_checkpointing")
    if model.is_activation_checkpointing if renamed else getattr(model, "is_gradient_checkpointing", False):
        raise ValueError("memopt.optimize: Hugging Face gradient checkpointing is on; memopt chooses what to "
                         "recompute itself -- call model.gradient_checkpointing_disable() first")


def decoder_chain(model: nn.Module, sample, granularity: str, blocks: Optional[nn.ModuleList] = None) -> ChainSpec:
    if granularity not in ("block", "sublayer"):
        raise ValueError(f"memopt.optimize: granularity '{granularity}' is not block or sublayer")
    _refused_options(model)
    input_ids, labels = lm_sample(sample)
    stages = DecoderStages(model, blocks if blocks is not None else find_blocks(model))
    stages.prepare(input_ids)
    if granularity == "sublayer" and not stages.can_halve():
        raise ValueError(f"memopt.optimize: granularity 'sublayer' is not available for {type(model).__name__}: "
                         f"its layers are not two residual halves ({', '.join(DecoderStages._HALVES)}); "
                         f"use granularity='block'")
    names, forwards, params = layer_stages(
        stages, stages.blocks, granularity, "layers",
        lambda b: (_own_parameters(b.input_layernorm) + _own_parameters(b.self_attn),
                   _own_parameters(b.post_attention_layernorm) + _own_parameters(b.mlp)))
    names, forwards = ["embed"] + names + ["head"], [stages.embed] + forwards + [stages.head]
    check_cut(model, forwards, input_ids, labels)
    before = [p for p in _own_parameters(stages.decoder)
              if not any(p is q for b in stages.blocks for q in b.parameters())
              and not any(p is q for q in stages.norm.parameters())]
    params = [before] + params + [_own_parameters(stages.norm) + _own_parameters(stages.head_module)]
    cfg = model.config
    model_json = {
        "name": cfg.model_type, "n_layer": len(stages.blocks), "n_embd": cfg.hidden_size,
        "vocab": cfg.vocab_size, "seq_len": int(input_ids.shape[1]), "batch": int(input_ids.shape[0]),
        "granularity": granularity, "source": f"transformers {type(model).__name__}",
    }
    return ChainSpec(names, forwards, params, model, True, model_json, input_ids, labels, stages)


def check_cut(model: nn.Module, forwards: List[Callable], input_ids, labels):
    """The chain's loss on the sample, stage after stage, equals the model's own,
    dropout off, or the model is refused (Note [Cutting a decoder at its blocks])."""
    with train_flags_kept(model), torch.no_grad():
        model.eval()
        own = model(input_ids=input_ids, labels=labels, use_cache=False).loss
        chained = input_ids
        for forward in forwards:
            chained = forward(chained, labels)
    if not torch.equal(own, chained):
        raise TypeError(f"memopt: {type(model).__name__} cut at its blocks does not reproduce its own forward "
                        f"(loss {chained.item():.9g} against {own.item():.9g}); memopt cuts causal LMs whose "
                        f"forward is embedding, blocks, one final norm, the output embedding and "
                        f"model.loss_function")

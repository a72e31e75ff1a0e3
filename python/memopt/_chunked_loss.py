"""A causal LM's head and loss computed a chunk of rows at a time:
memopt.optimize(chunked_loss=True).

Note [A chunked head]
The head of a causal LM -- final norm, output embedding, cross-entropy -- makes B x T x V
logits, and Hugging Face's loss copies them: upcast to float32, log-softmax, and in the
backward their gradient, several times B x T x V at once. With a large vocabulary that
is most of a step's peak (GPT-2 small at B = 8, T = 1024: 1.5 GiB per copy), so it is the
floor below which no plan fits, and at a budget just above it nothing else can be kept.
With chunked_loss=True the head's linear layer and the loss run as one autograd function
over chunks of rows, which makes the gradients in its forward: each chunk's logits
give the chunk's loss, then turn into their own gradient in place, whose products with
the weight and the chunk's hidden states are added into the gradients of the hidden
states, the weight and the bias; the backward only scales them by the loss's gradient.
Each chunk's log-sum-exp is taken in place -- the logits shifted by their row's largest
and exponentiated where they lie, with no second chunk-sized tensor such as
torch.logsumexp makes -- and the softmax they become turns into the gradient in place
too. The head then holds one chunk's logits and the gradients it will hand back -- the
hidden states' and the weight's, which the backward of HF's head makes too -- instead of
several B x T x V tensors, for the same three matrix products per chunk as HF's head.
The head's forward and backward run back to back in every plan (the loss is between
them), so gradients made early hold no memory longer than a backward would. Without
autograd (a profile's no-grad run) it makes only the loss.

It computes what Hugging Face's ForCausalLMLoss computes -- labels shifted by one,
-100 ignored, the mean over the tokens not ignored or, with num_items_in_batch, the sum
divided by it, an explicit shift_labels taken as given -- in float32 from logits made
in the head's dtype (under autocast, the autocast dtype), as HF upcasts them; only the
order of the sums differs, so the loss and the gradients equal HF's up to rounding. A
model whose head does more (a logit scale, a soft cap) or whose loss is not that one is
refused.

Note [The chunked head is not compiled]
With compile_stages=True the head stage's final norm is compiled, and the chunked head
and loss run eagerly (torch.compiler.disable, a graph break after the norm). Traced, the
autograd function's forward and backward become one joint graph, and AOTAutograd's
partitioner chooses what crosses from one to the other by size alone. Where the logits
of all chunks are smaller than the gradients made from them (fewer rows than the model
is wide: a short batch), it moves the gradients' computation into the backward and saves
the logits -- a B x T x V tensor, which the chunked head exists not to hold -- and the
backward, which then makes the weight's gradient, holds it twice. Eager, the head keeps
the order it was written in, whose peak the Note above states; its time is its matrix
products, which compiling would not shorten.
"""
from typing import Optional

import torch
from torch import nn

IGNORE_INDEX = -100
CHUNKED = "chunked"  # the profile's model/loss (docs/formats.md)
CHUNK_BYTES = 64 << 20  # one chunk's float32 logits, at most (and at least one row)


def rows_per_chunk(vocab: int) -> int:
    return max(1, CHUNK_BYTES // (4 * vocab))


class _LinearCrossEntropy(torch.autograd.Function):
    """loss = Σ_rows (logsumexp(l_r) - l_r[t_r]) / denominator over rows with t_r !=
    IGNORE_INDEX, l = h W^T + b in the head's dtype, upcast to float32; with
    `with_grads`, its gradients made in the same pass (Note [A chunked head])."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, denominator, chunk, with_grads):
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        if with_grads:
            grad_hidden = torch.empty_like(hidden)
            grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if bias is not None else None
        for start in range(0, hidden.shape[0], chunk):
            rows = slice(start, start + chunk)
            h = hidden[rows]
            logits = nn.functional.linear(h, weight, bias).float()
            t = targets[rows]
            valid = t != IGNORE_INDEX
            index = t.clamp(min=0).unsqueeze(1)
            target_logits = logits.gather(1, index).squeeze(1)
            # The log-sum-exp, shifted by each row's largest logit, in place (Note [A
            # chunked head]): the logits become exp(l - max), then the softmax.
            shift = logits.amax(dim=1, keepdim=True)
            sums = logits.sub_(shift).exp_().sum(dim=1, keepdim=True)
            lse = (shift + sums.log()).squeeze(1)
            total += torch.where(valid, lse - target_logits, 0.0).sum()
            if with_grads:
                # The softmax becomes the logits' gradient in place: less the one-hot
                # target, zero on ignored rows, over the denominator.
                logits.div_(sums)
                logits.scatter_add_(1, index, -valid.to(logits.dtype).unsqueeze(1))
                logits.mul_((valid.to(logits.dtype) / denominator).unsqueeze(1))
                grad_hidden[rows] = (logits.to(h.dtype) @ weight.to(h.dtype)).to(hidden.dtype)
                grad_weight.addmm_(logits.t(), h.float())
                if grad_bias is not None:
                    grad_bias += logits.sum(0)
            del logits  # the only reference: freed before the next chunk's are made
        if with_grads:
            ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
            ctx.weight_dtype = weight.dtype
        return total / denominator

    @staticmethod
    def backward(ctx, grad_loss):
        # Scaled in place: the step's backward runs once (no retain_graph through the head).
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        grad_loss = grad_loss.float()
        grad_hidden.mul_(grad_loss.to(grad_hidden.dtype))
        grad_weight = grad_weight.mul_(grad_loss).to(ctx.weight_dtype)
        if grad_bias is not None:
            grad_bias = grad_bias.mul_(grad_loss).to(ctx.weight_dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


@torch.compiler.disable  # Note [The chunked head is not compiled]
def causal_lm_loss(hidden: torch.Tensor, head: nn.Linear, labels: torch.Tensor,
                   num_items_in_batch=None, ignore_index: int = IGNORE_INDEX,
                   shift_labels: Optional[torch.Tensor] = None, **unknown) -> torch.Tensor:
    """Hugging Face's ForCausalLMLoss of head(hidden) against labels, chunked (Note [A
    chunked head])."""
    if unknown:
        raise TypeError(f"memopt: chunked_loss=True computes Hugging Face's causal LM loss, which takes no "
                        f"{', '.join(sorted(unknown))}; train without chunked_loss")
    if ignore_index != IGNORE_INDEX:
        raise ValueError(f"memopt: chunked_loss=True ignores label {IGNORE_INDEX}, not {ignore_index}")
    if shift_labels is None:
        shift_labels = nn.functional.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:]
    targets = shift_labels.reshape(-1).to(hidden.device)
    if num_items_in_batch is None:
        denominator = (targets != IGNORE_INDEX).sum().float()
    else:
        denominator = torch.as_tensor(num_items_in_batch, device=hidden.device).float()
    flat = hidden.reshape(-1, hidden.shape[-1])
    with_grads = torch.is_grad_enabled() and (flat.requires_grad or head.weight.requires_grad or
                                              (head.bias is not None and head.bias.requires_grad))
    return _LinearCrossEntropy.apply(flat, head.weight, head.bias, targets, denominator,
                                     rows_per_chunk(head.weight.shape[0]), with_grads)


def check_head(model: nn.Module, head: nn.Module):
    """Refuses a head chunked_loss=True would not compute as the model does."""
    name = type(model).__name__
    if not isinstance(head, nn.Linear):
        raise TypeError(f"memopt: chunked_loss=True needs {name}'s output embedding to be an nn.Linear, not "
                        f"{type(head).__name__}")
    loss = getattr(model, "loss_function", None)
    if getattr(loss, "__name__", None) != "ForCausalLMLoss":
        raise TypeError(f"memopt: chunked_loss=True computes Hugging Face's ForCausalLMLoss; {name}'s loss is "
                        f"{getattr(loss, '__name__', type(loss).__name__)}: train without chunked_loss")
    config = getattr(model, "config", None)
    for key in ("final_logit_softcapping", "logit_scale", "output_multiplier_scale", "logits_scaling"):
        value = getattr(config, key, None)
        if value not in (None, 1, 1.0):
            raise TypeError(f"memopt: {name} scales or caps its logits (config.{key} = {value}), which "
                            f"chunked_loss=True does not: train without chunked_loss")


def chunk_head(spec, model: nn.Module):
    """`spec` with its head stage computing the loss by chunks (Note [A chunked head])."""
    parts = getattr(spec.stages, "head_parts", None)
    if not spec.ends_with_loss or parts is None:
        raise TypeError(f"memopt: chunked_loss=True is for a causal LM whose head computes the loss; "
                        f"{type(model).__name__} is not one")
    norm, linear = parts()
    check_head(model, linear)
    stages = spec.stages

    def head(hidden_states, labels):
        return causal_lm_loss(norm(hidden_states), linear, labels, **stages.loss_kwargs)
    spec.forwards = spec.forwards[:-1] + [head]
    spec.model_json = dict(spec.model_json, loss=CHUNKED)
    return spec

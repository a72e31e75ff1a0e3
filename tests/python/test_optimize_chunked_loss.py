"""memopt.optimize(chunked_loss=True): a causal LM's head and Hugging Face's loss computed
a chunk of rows at a time (Note [A chunked head] in python/memopt/_chunked_loss.py) --
the loss and gradients of plain HF training up to rounding, with ignored labels and
num_items_in_batch; a head that no longer sets the smallest budget; peaks as predicted;
and the models it would not compute as they do refused."""
import copy

import pytest
import torch

import memopt
from memopt import _chunked_loss

transformers = pytest.importorskip("transformers")

import test_optimize_decoders as decoders  # noqa: E402  (the decoder tests' models)
from test_optimize_hf import grads  # noqa: E402

# Rows (B x T) well above the width, as in training, and a vocabulary large enough that
# the logits set store-all's peak.
B, T, V = 2, 64, 2048

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture
def small_chunks(monkeypatch):
    """7 rows per chunk: many chunks, the last one short."""
    monkeypatch.setattr(_chunked_loss, "CHUNK_BYTES", 4 * V * 7)


def gpt2(dropout=0.1, width=32):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=width, n_head=4, n_layer=3,
                                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                                     bos_token_id=0, eos_token_id=0)
    config._attn_implementation = "eager"
    return transformers.GPT2LMHeadModel(config).train()


def llama():
    return decoders.decoder("llama", vocab_size=V, hidden_size=32, intermediate_size=64)


def batch():
    ids = torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[0, :5] = -100  # a prompt the loss ignores
    return ids, labels


def step(model, ids, labels, seed, **loss_kwargs):
    model.zero_grad(set_to_none=False)
    torch.manual_seed(seed)
    base = memopt.testbed.current_bytes()
    memopt.testbed.reset_peak()
    loss = model(input_ids=ids, labels=labels, **loss_kwargs).loss
    loss.backward()
    peak = memopt.testbed.peak_bytes() - base  # before the gradients are copied out
    return loss.detach(), grads(model), peak


def assert_close_to(result, reference):
    (loss, g, _), (ref_loss, ref_g, _) = result, reference
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for n in ref_g:
        torch.testing.assert_close(g[n], ref_g[n], rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("budget", ["100%", "min"])
def test_the_chunked_head_trains_as_plain_hf_training(make, budget, small_chunks):
    plain = make()
    model = copy.deepcopy(plain)
    ids, labels = batch()
    memopt.optimize(model, ids, budget=budget, repeat=1, other_shapes=False, chunked_loss=True)
    assert model.memopt_plan.profile["model"]["loss"] == "chunked"
    for seed in (3, 4):
        assert_close_to(step(model, ids, labels, seed), step(plain, ids, labels, seed))
    # HF's Trainer divides the summed loss by the tokens of the whole accumulated batch.
    items = torch.tensor(3 * int((labels[:, 1:] != -100).sum()))
    assert_close_to(step(model, ids, labels, 5, num_items_in_batch=items),
                    step(plain, ids, labels, 5, num_items_in_batch=items))


def test_the_head_no_longer_sets_the_floor_and_peaks_are_predicted(small_chunks):
    ids, labels = batch()
    own = copy.deepcopy(gpt2())
    memopt.optimize(own, ids, budget="min", repeat=1, other_shapes=False)
    own_plan = own.memopt_plan
    logits = B * T * V * 4
    for budget in ("100%", "60%", "min"):
        model = gpt2()
        memopt.optimize(model, ids, budget=budget, repeat=1, other_shapes=False, chunked_loss=True)
        plan = model.memopt_plan
        # HF's loss holds the logits, their float32 copy, the log-softmax and its gradient.
        assert plan.predicted["store_all_peak_bytes"] <= own_plan.predicted["store_all_peak_bytes"] - logits
        if budget == "min":
            assert plan.budget_bytes <= own_plan.budget_bytes - logits
        step(model, ids, labels, 6)  # warm-up
        _, _, peak = step(model, ids, labels, 6)
        assert peak <= plan.budget_bytes, (budget, peak, plan.budget_bytes)
        # The prediction counts a_0, the token ids the caller made.
        assert abs(peak - plan.predicted["peak_bytes"]) <= B * T * 8, (budget, peak, plan.predicted["peak_bytes"])


def test_the_head_holds_one_chunk_of_logits_at_a_time(small_chunks):
    """Its forward's temporaries are one chunk's float32 logits (the log-sum-exp and the
    gradient taken in place, each chunk freed before the next is made), the final norm's
    output, and vectors of a few numbers per row -- with and without autograd."""
    ids, labels = batch()
    width = 32
    profile = memopt.profile(gpt2(width=width), {"input_ids": ids, "labels": labels}, repeat=1,
                             progress=False, chunked_loss=True)
    head = profile["stages"][-1]
    chunk = _chunked_loss.rows_per_chunk(V) * V * 4
    norm_output = B * T * width * 4
    per_row = B * T * 64  # targets, masks and per-row sums, generously
    for key in ("fwd_keep_tmp_bytes", "fwd_tmp_nograd_bytes"):
        assert chunk <= head[key] <= chunk + norm_output + per_row, (key, head[key], chunk)


@pytest.mark.parametrize("budget,link", [("100%", None), ("min", None), ("60%", "100GB/s")])
def test_with_compiled_stages_it_trains_as_plain_hf_and_peaks_as_predicted(budget, link, small_chunks):
    """Both options at once: the blocks and the final norm compiled, the chunked head eager."""
    plain = gpt2()
    model = copy.deepcopy(plain)
    ids, labels = batch()
    memopt.optimize(model, ids, budget=budget, link=link, repeat=1, other_shapes=False, chunked_loss=True,
                    compile_stages=True)
    plan = model.memopt_plan
    assert (plan.profile["model"]["loss"], plan.profile["model"]["compiled"]) == ("chunked", "torch.compile")
    ops = [op[0] for op in plan.schedule["ops"]]
    assert ("fwd_ckpt" in ops) == (budget == "min")
    assert ("offload_saved" in ops) == (link is not None)
    step(model, ids, labels, 2)  # warm-up: the first step's backward also makes the .grad buffers
    for seed in (3, 4):
        result = step(model, ids, labels, seed)
        assert_close_to(result, step(plain, ids, labels, seed))
        peak = result[2]
        assert peak <= plan.budget_bytes, (peak, plan.budget_bytes)
        # The prediction counts a_0, the token ids the caller made.
        assert abs(peak - plan.predicted["peak_bytes"]) <= B * T * 8, (peak, plan.predicted["peak_bytes"])


def test_compiled_stages_leave_the_chunked_head_holding_what_it_holds_eager(small_chunks):
    """Compiling the stages must not undo the chunking (Note [The chunked head is not
    compiled]): the head stage saves its gradients, not the logits of every chunk, and
    its backward makes nothing, exactly as the eager chunked head's. The model is wider
    than the batch has rows, so that the gradients outweigh the logits, as in a short
    batch, where a compiled head would save the logits instead."""
    ids, labels = batch()
    width = 2 * B * T
    heads = {}
    for compiled in (False, True):
        profile = memopt.profile(gpt2(width=width), {"input_ids": ids, "labels": labels}, repeat=1, progress=False,
                                 chunked_loss=True, compile_stages=compiled)
        heads[compiled] = profile["stages"][-1]
    for key in ("saved_bytes", "bwd_tmp_bytes"):
        assert heads[True][key] == heads[False][key], (key, heads[True][key], heads[False][key])


def test_models_the_chunked_head_would_not_compute_as_they_do_are_refused():
    ids, _ = batch()
    capped = gpt2()
    capped.config.final_logit_softcapping = 30.0
    with pytest.raises(TypeError, match="final_logit_softcapping"):
        memopt.optimize(capped, ids, other_shapes=False, chunked_loss=True)
    seq = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    with pytest.raises(TypeError, match="chunked_loss=True is for a causal LM"):
        memopt.optimize(seq, torch.randn(4, 8), chunked_loss=True)
    model = gpt2()
    own = memopt.profile(model, ids, repeat=1, progress=False)
    with pytest.raises(ValueError, match="chunked_loss=False"):
        memopt.optimize(model, ids, profile=own, other_shapes=False, chunked_loss=True)
    with pytest.raises(TypeError, match="chunked_loss must be True or False"):
        memopt.optimize(model, ids, other_shapes=False, chunked_loss=1)


def test_under_bfloat16_autocast_it_trains_as_plain_hf_and_peaks_as_predicted():
    """The logits are made in bfloat16 and upcast, as HF makes them; the weight's
    gradient is summed in float32 over the chunks where HF sums it in bfloat16, so that
    gradient agrees to bfloat16's precision, the others closer."""
    plain = gpt2()
    model = copy.deepcopy(plain)
    ids, labels = batch()
    for m in (plain, model):  # static state, made before the measured steps
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        memopt.optimize(model, ids, budget="min", repeat=1, other_shapes=False, chunked_loss=True)

    def autocast_step(m, seed):
        m.zero_grad(set_to_none=False)
        torch.manual_seed(seed)
        base = memopt.testbed.current_bytes()
        memopt.testbed.reset_peak()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=labels).loss
        loss.backward()
        return loss.detach(), grads(m), memopt.testbed.peak_bytes() - base

    autocast_step(model, 1)  # warm-up
    (ref_loss, ref_grads, _), (loss, g, peak) = autocast_step(plain, 2), autocast_step(model, 2)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for n in ref_grads:
        torch.testing.assert_close(g[n], ref_grads[n], rtol=1e-2, atol=1e-4, msg=lambda m: f"{n}: {m}")
    plan = model.memopt_plan
    assert peak <= plan.budget_bytes
    assert abs(peak - plan.predicted["peak_bytes"]) <= B * T * 8, (peak, plan.predicted["peak_bytes"])

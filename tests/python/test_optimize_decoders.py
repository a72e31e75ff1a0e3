"""memopt.optimize on unmodified Hugging Face decoder LMs -- Llama, Mistral, Qwen2,
Qwen3, GPT-NeoX, Phi-3 -- built small in the test, against plain HF training: losses and
gradients bit for bit over two steps with dropout on, for recompute, offload,
saved-state offload and optimal plans; peaks within the budget, as predicted, falling
with it; what users do around training (eval, inference, state_dict, gradient
accumulation, padding masks) unchanged; options refused by name."""
import copy
import warnings

import pytest
import torch

import memopt
from memopt import testbed

transformers = pytest.importorskip("transformers")

B, T, V = 2, 32, 96
COMMON = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              max_position_embeddings=64, bos_token_id=0, eos_token_id=0, pad_token_id=0)
# Each architecture with the options that make it itself: grouped-query attention,
# sliding windows, tied or untied embeddings, dropout wherever it has one.
ARCHS = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(num_key_value_heads=2, attention_dropout=0.1)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(num_key_value_heads=2, sliding_window=16,
                                                            attention_dropout=0.1)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(num_key_value_heads=2, use_sliding_window=True,
                                                      sliding_window=16, max_window_layers=1,
                                                      attention_dropout=0.1, tie_word_embeddings=True)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(num_key_value_heads=2, head_dim=16, attention_dropout=0.1)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(attention_dropout=0.1, hidden_dropout=0.1)),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(num_key_value_heads=2, attention_dropout=0.1, resid_pdrop=0.1,
                                                   embd_pdrop=0.1)),
}


def decoder(arch, attention="sdpa", seed=0, **overrides):
    model_class, config_class, options = ARCHS[arch]
    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**{**COMMON, **options, **overrides})
    config._attn_implementation = attention
    return getattr(transformers, model_class)(config).train()


def batch(seed=1):
    return torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(seed))


def step(model, ids, seed, attention_mask=None):
    """One step of the user's loop; the loss and the testbed's peak above the step's start."""
    model.zero_grad(set_to_none=False)
    torch.manual_seed(seed)
    base = testbed.current_bytes()
    testbed.reset_peak()
    loss = model(input_ids=ids, labels=ids, attention_mask=attention_mask).loss
    loss.backward()
    return loss.detach(), testbed.peak_bytes() - base


def assert_same_grads(a, b):
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p.grad, q.grad), f"gradient of {n} differs: max |diff| {(p.grad - q.grad).abs().max()}"


def assert_plan_kind(plan, budget, solver):
    """Each of PLANS does what it is there for."""
    ops = {op[0] for op in plan.schedule["ops"]}
    expected = {"min": {"fwd_ckpt"}, "100%": {"offload", "prefetch"}, "60%": {"offload_saved", "prefetch_saved"},
                "40%": {"offload_input"}}[budget]
    assert expected <= ops, (budget, solver, sorted(ops))


PLANS = [
    ("min", None, "optimal"),              # recomputation only
    ("100%", "16GB/s", "offload-all"),     # every activation offloaded
    ("60%", "100GB/s", "optimal"),         # moves saved state
    ("40%", "2GB/s", "optimal"),
]



pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("budget,link,solver", PLANS)
def test_gradients_equal_plain_hf_training_bit_for_bit(arch, budget, link, solver):
    plain = decoder(arch)
    model = copy.deepcopy(plain)
    ids = batch()
    memopt.optimize(model, ids, budget=budget, link=link, solver=solver, repeat=1, progress=False)
    plan = model.memopt_plan
    assert plan.profile["model"]["source"] == f"transformers {ARCHS[arch][0]}"
    assert len(plan.profile["stages"]) == COMMON["num_hidden_layers"] + 2
    for seed in (11, 12):  # a second step: the runner and its copy engine are reused
        ref_loss, _ = step(plain, ids, seed)
        loss, _ = step(model, ids, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(model, plain)
    assert_plan_kind(plan, budget, solver)


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2", "qwen3", "phi3"])
@pytest.mark.parametrize("budget,link,solver", PLANS)
def test_half_blocks_train_as_plain_hf_training(arch, budget, link, solver):
    """Note [Half blocks of a pre-norm decoder layer]: attention and MLP halves."""
    plain = decoder(arch)
    model = copy.deepcopy(plain)
    ids = batch()
    memopt.optimize(model, ids, budget=budget, link=link, solver=solver, granularity="sublayer", repeat=1,
                    progress=False, other_shapes=False)
    names = [s["name"] for s in model.memopt_plan.profile["stages"]]
    assert names[1:3] == ["layers.0.attn", "layers.0.mlp"] and len(names) == 2 * COMMON["num_hidden_layers"] + 2
    assert_plan_kind(model.memopt_plan, budget, solver)
    for seed in (41, 42):
        ref_loss, _ = step(plain, ids, seed)
        loss, _ = step(model, ids, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(model, plain)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_both_attention_kernels_and_padding_masks(attention):
    plain = decoder("llama", attention)
    model = copy.deepcopy(plain)
    ids = batch()
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, T - 5:] = 0  # the second sequence padded at its end
    memopt.optimize(model, ids, budget="min", repeat=1, progress=False)
    for seed, m in ((21, None), (22, mask)):
        model.zero_grad(set_to_none=False)
        plain.zero_grad(set_to_none=False)
        ref_loss, _ = step(plain, ids, seed, m)
        loss, _ = step(model, ids, seed, m)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(model, plain)


def step_input_bytes(model):
    """Bytes of what the blocks read besides their input (mask, rotary tables): made
    before each step like the labels, not in the budget."""
    seen, total = set(), 0
    for rest, kwargs in model.forward.stages.block_args:
        for v in list(rest) + list(kwargs.values()):
            for t in (v if isinstance(v, tuple) else (v,)):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                    seen.add(t.untyped_storage().data_ptr())
                    total += t.untyped_storage().nbytes()
    return total


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_peak_stays_within_the_budget_falls_with_it_and_is_predicted(arch):
    ids = batch()
    peaks = []
    for budget in ("100%", "70%", "40%", "min"):
        model = decoder(arch, attention="eager")
        memopt.optimize(model, ids, budget=budget, repeat=1, progress=False, other_shapes=False)
        step(model, ids, 3)  # warm-up: lazily allocated state
        _, peak = step(model, ids, 3)
        plan = model.memopt_plan
        predicted = plan.predicted["peak_bytes"]
        assert peak <= plan.budget_bytes + step_input_bytes(model), (budget, peak, plan.budget_bytes)
        # a_0 (the B x T int64 ids) and the step's inputs, allocated before the step
        # starts, are all that may differ.
        assert abs(peak - predicted) <= B * T * 8 + step_input_bytes(model), (budget, peak, predicted)
        peaks.append(peak)
    assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


def test_what_users_do_around_training_keeps_working():
    plain = decoder("mistral")
    model = copy.deepcopy(plain)
    ids = batch()
    keys = list(model.state_dict())
    memopt.optimize(model, ids, budget="min", repeat=1, progress=False)
    assert list(model.state_dict()) == keys
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))
    # Gradient accumulation over two micro-batches.
    for m in (plain, model):
        m.zero_grad(set_to_none=False)
        for seed, micro in ((31, batch(2)), (32, batch(3))):
            torch.manual_seed(seed)
            (m(input_ids=micro, labels=micro).loss / 2).backward()
    assert_same_grads(model, plain)
    # Evaluation and inference without labels: the model's own forward.
    model.eval()
    plain.eval()
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, plain(input_ids=ids).logits)
        assert torch.equal(model(input_ids=ids, labels=ids).loss, plain(input_ids=ids, labels=ids).loss)
    out = model.generate(ids[:, :4], max_new_tokens=3, do_sample=False)
    assert torch.equal(out, plain.generate(ids[:, :4], max_new_tokens=3, do_sample=False))
    memopt.unoptimize(model)
    assert "forward" not in model.__dict__


def test_blocks_can_be_named_and_other_models_are_refused_by_name():
    ids = batch()
    plain = decoder("llama")
    model = copy.deepcopy(plain)
    memopt.optimize(model, ids, budget="min", repeat=1, progress=False, blocks=model.model.layers,
                    other_shapes=False)
    step(plain, ids, 5)
    step(model, ids, 5)
    assert_same_grads(model, plain)

    with pytest.raises(ValueError, match="granularity 'sublayer' is not available for GPTNeoXForCausalLM"):
        memopt.optimize(decoder("gpt_neox"), ids, granularity="sublayer", repeat=1)
    checkpointed = decoder("llama")
    checkpointed.gradient_checkpointing_enable()
    with pytest.raises(ValueError, match="gradient checkpointing is on"):
        memopt.optimize(checkpointed, ids, repeat=1)
    with pytest.raises(ValueError, match=r"made for input_ids of shape \(2, 32\), got \(1, 32\), and "
                                         r"optimize\(..., other_shapes=False\) planned that shape only"):
        model(input_ids=ids[:1], labels=ids[:1])
    with pytest.raises(ValueError, match="trains on input_ids, labels and attention_mask; got position_ids"):
        model(input_ids=ids, labels=ids, position_ids=torch.arange(T)[None])

    class ScaledLogits(transformers.LlamaForCausalLM):
        """Does something after its blocks that memopt's cut does not: never trained wrongly."""

        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            if out.loss is not None:
                out.loss = out.loss * 2
            return out

    torch.manual_seed(0)
    odd = ScaledLogits(decoder("llama").config)
    with pytest.raises(TypeError, match="does not reproduce its own forward"):
        memopt.optimize(odd, ids, repeat=1)


def kept_bytes(profile):
    """Every byte count of a profile that is not a temporary (Note [How a profile scales
    with the batch shape])."""
    from memopt._shapes import _is_temporary, _leaves
    return {p: v for p, v in _leaves(profile) if isinstance(v, int) and not _is_temporary(p)}


@pytest.mark.parametrize("arch,granularity", [(a, "block") for a in sorted(ARCHS)] + [("llama", "sublayer"),
                                                                                       ("phi3", "sublayer")])
def test_batches_of_other_shapes_get_their_own_plans_under_the_same_budget(arch, granularity):
    plain = decoder(arch)
    model = copy.deepcopy(plain)
    memopt.optimize(model, batch(), budget="40%", link="2GB/s", granularity=granularity, repeat=1, progress=False)
    plans = model.memopt_plans
    assert plans.law is not None, plans.why_no_law
    budget = model.memopt_plan.budget_bytes
    step(model, batch(), 3)  # warm-up: lazily allocated state
    # Dynamic padding: every batch its own length, within the sample's (2, 32).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these is profiled again
        for seed, shape in enumerate([(2, 24), (1, 17), (2, 13), (2, 24)]):
            ids = torch.randint(1, V, shape, generator=torch.Generator().manual_seed(seed))
            ref_loss, _ = step(plain, ids, 50 + seed)
            loss, peak = step(model, ids, 50 + seed)
            assert torch.equal(loss, ref_loss), shape
            assert_same_grads(model, plain)
            plan = plans[shape]
            assert plan.budget_bytes == budget and plan.predicted["peak_bytes"] <= budget
            assert plan.profile["model"]["seq_len"] == shape[1] and plan.profile["model"]["batch"] == shape[0]
            # The step's inputs (ids, mask, rotary tables) are not in the plan; the
            # embedding's backward sizes a buffer by the tokens it sees.
            slack = shape[0] * shape[1] * 8 + step_input_bytes(model) + 1024
            assert peak <= budget + slack, (shape, peak, budget)
            # What stages keep is the law's, to the byte, against a profile of this shape.
            measured = memopt.profile(plain, ids, granularity=granularity, repeat=1, progress=False)
            assert kept_bytes(plan.profile) == kept_bytes(measured), shape
    assert sorted(plans) == [(1, 17), (2, 13), (2, 24), (2, 32)]
    # A batch longer than the sample (if fewer tokens) is outside the probed shapes: profiled on its
    # first batch, said so, and trained exactly.
    ids = torch.randint(1, V, (1, 40), generator=torch.Generator().manual_seed(9))
    with pytest.warns(UserWarning, match=r"profiling a batch of shape \(1, 40\) for its own plan, because it is "
                                         r"larger than the sample \(2, 32\)"):
        loss, _ = step(model, ids, 60)
    ref_loss, _ = step(plain, ids, 60)
    assert torch.equal(loss, ref_loss)
    assert_same_grads(model, plain)
    assert plans[(1, 40)].budget_bytes == budget


def test_a_shape_that_does_not_fit_the_budget_says_so():
    model = decoder("llama")
    short = batch()[:, :16]
    memopt.optimize(model, short, budget="min", repeat=1, progress=False)
    long = torch.randint(1, V, (2, 64))
    with pytest.warns(UserWarning, match="profiling a batch of shape"), \
            pytest.raises(memopt.InfeasibleBudget, match=r"a batch of shape \(2, 64\) does not fit the budget of "
                                                          r"\d+ bytes that optimize\(\) resolved on the sample .*"
                                                          r"smallest budget that works .* fits the largest batch"):
        model(input_ids=long, labels=long)


def test_moving_saved_state_leaves_the_steps_inputs_in_place():
    """Every block saves the rotary tables for its backward; they are the step's, made
    before it and outside the budget, so offload_saved moves only what the block made.
    Here the tables (2 x T x head_dim floats, one head of 256) outweigh any slack of the
    copy engine's host pool, which holds exactly the plan's offloaded bytes."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=V, hidden_size=256, intermediate_size=256, num_hidden_layers=4,
                                      num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=256)
    config._attn_implementation = "eager"
    plain = transformers.LlamaForCausalLM(config).train()
    model = copy.deepcopy(plain)
    ids = torch.randint(1, V, (1, 256), generator=torch.Generator().manual_seed(4))
    memopt.optimize(model, ids, budget="75%", link="1GB/s", repeat=1, progress=False, other_shapes=False)
    ops = [op[0] for op in model.memopt_plan.schedule["ops"]]
    assert "offload_saved" in ops, ops
    for seed in (81, 82):
        ref_loss, _ = step(plain, ids, seed)
        loss, _ = step(model, ids, seed)
        assert torch.equal(loss, ref_loss)
        assert_same_grads(model, plain)


def test_hugging_face_trainer_trains_as_it_does_without_memopt(tmp_path):
    """transformers' Trainer, dynamic padding and two micro-batches per step (the loss
    normalized by the tokens of both, num_items_in_batch): the same losses and, after
    three optimizer steps, the same weights as the plain model's Trainer, bit for bit."""
    pytest.importorskip("accelerate")
    g = torch.Generator().manual_seed(7)
    data = [{"input_ids": torch.randint(1, V, (n,), generator=g)} for n in (32, 20, 27, 32, 11, 25, 32, 16)]

    def pad(rows):
        longest = max(len(r["input_ids"]) for r in rows)
        ids = torch.zeros(len(rows), longest, dtype=torch.long)
        mask = torch.zeros(len(rows), longest, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r["input_ids"])] = r["input_ids"]
            mask[i, :len(r["input_ids"])] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}

    def train(model, folder):
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / folder), per_device_train_batch_size=2, gradient_accumulation_steps=2,
            max_steps=3, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
            seed=5, dataloader_num_workers=0, disable_tqdm=True)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=pad)
        trainer.train()
        return [h["loss"] for h in trainer.state.log_history if "loss" in h]

    plain = decoder("llama")
    model = copy.deepcopy(plain)
    longest = pad(data[:2])  # the largest batch the training sees
    memopt.optimize(model, {"input_ids": longest["input_ids"], "labels": longest["labels"]}, budget="50%",
                    link="2GB/s", repeat=1, progress=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="memopt")  # every batch is planned from the shape law
        losses = train(model, "memopt")
    assert losses == train(plain, "plain") and len(losses) == 3
    for (name, p), q in zip(model.named_parameters(), plain.parameters()):
        assert torch.equal(p, q), name
    assert len(model.memopt_plans) > 2  # the batches had several shapes


def test_gradients_accumulated_before_a_profiled_shape_survive_it():
    """A micro-batch longer than the sample is profiled inside the step; the profile
    must neither erase the gradients of the micro-batches before it nor move the
    random state its dropout masks come from."""
    plain = decoder("llama")
    model = copy.deepcopy(plain)
    memopt.optimize(model, batch(), budget="50%", link="2GB/s", repeat=1, progress=False)
    longer = torch.randint(1, V, (1, 40), generator=torch.Generator().manual_seed(8))
    for m in (plain, model):
        m.zero_grad(set_to_none=False)
        torch.manual_seed(90)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the profiling warning, tested elsewhere
            for micro in (batch(2), longer):
                (m(input_ids=micro, labels=micro).loss / 2).backward()
    assert_same_grads(model, plain)


def test_a_second_forward_before_the_backward_is_refused():
    """The stages read one step's inputs (mask, rotary tables) when they recompute: a
    second forward before the first one's backward would give it the second's."""
    model = decoder("qwen3")
    memopt.optimize(model, batch(), budget="min", repeat=1, progress=False)
    first = model(input_ids=batch(), labels=batch()).loss
    with pytest.raises(ValueError, match="a forward while the previous step's backward is still to come"):
        model(input_ids=batch()[:, :20], labels=batch()[:, :20])
    first.backward()
    model(input_ids=batch(), labels=batch()).loss.backward()  # after it, fine
    del first
    model(input_ids=batch(), labels=batch())  # a loss dropped without backward ends its step
    model(input_ids=batch(), labels=batch()).loss.backward()


def test_a_one_row_sample_is_probed_within_its_tokens_and_plans_shorter_rows():
    plain = decoder("mistral")
    model = copy.deepcopy(plain)
    one_row = torch.randint(1, V, (1, 64), generator=torch.Generator().manual_seed(6))
    memopt.optimize(model, one_row, budget="50%", link="2GB/s", repeat=1, progress=False)
    law = model.memopt_plans.law
    assert law is not None, model.memopt_plans.why_no_law
    assert model.memopt_plans.why_no_law is None
    assert max(b * t for b, t in law.temporaries) == 64  # no probe holds more tokens than the sample
    ids = one_row[:, :37]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref, _ = step(plain, ids, 7)
        loss, _ = step(model, ids, 7)
    assert torch.equal(loss, ref)
    assert_same_grads(model, plain)


def test_a_transformers_model_without_a_head_is_refused_by_name():
    config = transformers.LlamaConfig(**{**COMMON, "num_key_value_heads": 2})
    with pytest.raises(TypeError, match="LlamaModel is a transformers model but not a causal LM"):
        memopt.optimize(transformers.LlamaModel(config), batch(), repeat=1, progress=False)

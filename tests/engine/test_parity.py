"""The hooked engine equals the plain Hugging Face model: logits, attentions, greedy tokens, cache."""

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel

from engine import SamplingSettings, Session, load_model

PROMPT = "The database stores each row of a table"


@pytest.fixture(scope="module", params=["demo", "tiny"])
def loaded(request, demo_model, tiny_model):
    return demo_model if request.param == "demo" else tiny_model


def plain_model(loaded, attn="eager"):
    """An independent, unhooked copy of the same weights."""
    return GPT2LMHeadModel.from_pretrained(
        loaded.info.source, attn_implementation=attn, dtype=torch.float32, local_files_only=True
    ).eval()


def test_prefill_logits_and_attentions_equal_plain_model(loaded):
    session = Session(loaded, SamplingSettings(greedy=True))
    ids = session.set_prompt(PROMPT)
    trace = session.step()
    with torch.no_grad():
        out = plain_model(loaded)(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    np.testing.assert_allclose(trace.record.logits, out.logits[0, -1].numpy(), atol=1e-5, rtol=0)
    for layer, attn in enumerate(out.attentions):
        np.testing.assert_allclose(trace.record.attn[layer].astype(np.float32), attn[0].numpy(), atol=1e-3)
    # resid: embeddings then every block; the last hidden state HF reports is after ln_f
    for layer in range(loaded.info.n_layer):
        np.testing.assert_allclose(trace.record.resid[layer], out.hidden_states[layer][0].numpy(), atol=1e-5)
    np.testing.assert_allclose(trace.record.final_hidden, out.hidden_states[-1][0, -1].numpy(), atol=1e-5)
    np.testing.assert_allclose(
        trace.record.token_embed + trace.record.pos_embed, out.hidden_states[0][0].numpy(), atol=1e-6
    )


def test_attention_float32_values_within_1e5(loaded):
    """The float16 history copy is for compactness; the pattern itself matches to 1e-5 before rounding."""
    session = Session(loaded, SamplingSettings(greedy=True))
    ids = session.set_prompt(PROMPT)
    from engine import hooks

    with torch.inference_mode(), hooks.capture(loaded.model, loaded.info.n_layer) as rec:
        loaded.model(torch.tensor([ids]))
        patterns = [rec[f"blocks.{i}.attn.hook_pattern"][0].numpy().copy() for i in range(loaded.info.n_layer)]
    with torch.no_grad():
        out = plain_model(loaded)(torch.tensor([ids]), output_attentions=True)
    for mine, theirs in zip(patterns, out.attentions):
        np.testing.assert_allclose(mine, theirs[0].numpy(), atol=1e-5, rtol=0)


def test_hooks_are_removed_after_each_step(loaded):
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    session.step()
    session.step()
    assert all(not m._forward_hooks for m in loaded.model.modules())


def test_greedy_steps_equal_generate(loaded):
    steps = 12
    session = Session(loaded, SamplingSettings(greedy=True), max_new_tokens=steps)
    ids = session.set_prompt(PROMPT)
    mine = [session.step().chosen for _ in range(steps)]
    with torch.no_grad():
        out = plain_model(loaded, attn="sdpa").generate(
            torch.tensor([ids]), max_new_tokens=steps, min_new_tokens=steps, do_sample=False, pad_token_id=0
        )
    assert mine == out[0, len(ids):].tolist()


def test_each_decode_step_equals_full_recompute(loaded):
    session = Session(loaded, SamplingSettings(temperature=1.0, seed=7))
    session.set_prompt(PROMPT)
    plain = plain_model(loaded)
    for _ in range(8):
        trace = session.step()
        with torch.no_grad():
            full = plain(torch.from_numpy(trace.context_ids)[None], output_attentions=True)
        np.testing.assert_allclose(trace.record.logits, full.logits[0, -1].numpy(), atol=1e-4, rtol=0)
        # the one attention row of a decode step is the last row of the full pattern
        last_rows = np.stack([a[0, :, -1:, :].numpy() for a in full.attentions])
        np.testing.assert_allclose(trace.record.attn[:, :, -1:, :].astype(np.float32), last_rows, atol=1e-3)


def test_kv_cache_grows_one_position_per_step(loaded):
    session = Session(loaded, SamplingSettings(greedy=True))
    prompt_len = len(session.set_prompt(PROMPT))
    info = loaded.info
    for step in range(4):
        kv = session.step().record.kv
        assert kv.positions == prompt_len + step
        assert kv.key_positions.tolist() == kv.value_positions.tolist() == [prompt_len + step] * info.n_layer
        assert kv.total_bytes == 2 * info.n_layer * kv.positions * info.d_model * 4
        assert kv.capacity == info.n_positions


def test_load_twice_gives_identical_logits(tiny_dir):
    a, b = load_model(str(tiny_dir)), load_model(str(tiny_dir))
    traces = []
    for loaded in (a, b):
        s = Session(loaded, SamplingSettings(greedy=True))
        s.set_prompt(PROMPT)
        traces.append(s.step().record.logits)
    np.testing.assert_array_equal(*traces)

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


DEMO_SLOW = pytest.mark.parametrize("loaded", [pytest.param("demo", marks=pytest.mark.slow), "tiny"], indirect=True)  # demo: over 5 s


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


@DEMO_SLOW
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


@DEMO_SLOW
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


def held_bytes(a: np.ndarray) -> int:
    """Bytes of the buffer behind ``a`` (a numpy view of a torch tensor keeps all of its storage)."""
    base = a.base
    if isinstance(base, torch.Tensor):
        return base.untyped_storage().nbytes()
    return a.nbytes if base is None else held_bytes(base)


def run_steps(loaded, steps: int, **kwargs) -> list:
    session = Session(loaded, SamplingSettings(greedy=True), **kwargs)
    session.set_prompt(PROMPT)
    return [session.step().record for _ in range(steps)], session


def test_uncached_run_equals_cached_run(loaded):
    """No cache: every step runs the whole sequence; the records equal the cached run's."""
    cached, _ = run_steps(loaded, 8)
    uncached, session = run_steps(loaded, 8, use_cache=False)
    assert session.cache_length() == 0
    for a, b in zip(cached, uncached):
        top2 = np.sort(a.logits)[-2:]
        assert top2[1] - top2[0] > 1e-3  # no near-tie at the top: greedy must agree
        assert a.chosen == b.chosen and (a.step, a.start, a.n_new) == (b.step, b.start, b.n_new)
        np.testing.assert_allclose(b.logits, a.logits, atol=1e-5, rtol=0)
        assert b.attn.shape == a.attn.shape and b.attn.dtype == np.float16
        np.testing.assert_allclose(b.attn.astype(np.float32), a.attn.astype(np.float32), atol=1e-3, rtol=0)  # float16 rounding
        np.testing.assert_allclose(b.resid, a.resid, atol=1e-5, rtol=0)
        np.testing.assert_allclose(b.final_hidden, a.final_hidden, atol=1e-5, rtol=0)
        np.testing.assert_array_equal(b.token_embed, a.token_embed)
        np.testing.assert_array_equal(b.pos_embed, a.pos_embed)
        assert b.kv.positions == 0 and b.kv.total_bytes == 0 and b.kv.key_positions.tolist() == [0] * loaded.info.n_layer
        assert a.kv.positions == a.end
        assert b.forward_ms > 0 and b.step_ms >= b.forward_ms
        for name in ("token_embed", "pos_embed", "attn", "resid", "final_hidden", "logits"):
            assert held_bytes(getattr(b, name)) == getattr(a, name).nbytes, name  # no whole-sequence buffer kept alive


def test_cache_switched_off_and_on_mid_session(loaded):
    reference, _ = run_steps(loaded, 7)
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    records = [session.step().record for _ in range(3)]
    session.use_cache = False
    assert session.cache_length() == 0
    records += [session.step().record for _ in range(2)]
    session.use_cache = True  # the next step rebuilds the cache from the whole sequence
    records += [session.step().record for _ in range(2)]
    assert session.cache_length() == records[-1].end
    assert [r.kv.positions for r in records] == [records[0].end, records[1].end, records[2].end, 0, 0, records[5].end, records[6].end]
    assert [r.chosen for r in records] == [r.chosen for r in reference]
    for a, b in zip(reference, records):
        np.testing.assert_allclose(b.logits, a.logits, atol=1e-5, rtol=0)
    session.rewind(4)
    assert session.cache_length() == records[4].end


def test_cached_keys_and_values_equal_the_model_projection(loaded):
    """cached_kv(layer, head) is the model's own c_attn of ln_1(resid_pre) at every cached position."""
    session = Session(loaded, SamplingSettings(temperature=1.0, seed=3))
    session.set_prompt(PROMPT)
    records = [session.step().record for _ in range(4)]
    info = loaded.info
    d, H = info.d_model, info.n_head
    dh = d // H
    for layer in range(info.n_layer):
        resid_pre = np.concatenate([r.resid[layer] for r in records])[: records[-1].end]  # [T, d]: block L's input
        block = loaded.model.transformer.h[layer]
        with torch.no_grad():
            qkv = block.attn.c_attn(block.ln_1(torch.from_numpy(resid_pre))).numpy()  # [T, 3d]
        for head in range(H):
            keys, values = session.cached_kv(layer, head)
            assert keys.shape == values.shape == (records[-1].end, dh) and keys.dtype == np.float32
            np.testing.assert_allclose(keys, qkv[:, d + head * dh : d + (head + 1) * dh], atol=1e-5, rtol=0)
            np.testing.assert_allclose(values, qkv[:, 2 * d + head * dh : 2 * d + (head + 1) * dh], atol=1e-5, rtol=0)
    session.rewind(1)  # Back: the rows of the dropped steps are gone
    assert session.cached_kv(0, 0)[0].shape == (records[1].end, dh)
    session.use_cache = False
    assert session.cached_kv(0, 0)[0].shape == (0, dh)


def test_the_newest_query_against_the_cached_keys_gives_the_attention_row(loaded):
    """softmax(keys @ q / sqrt(dh)) over the cached keys is the recorded attention row of the newest position."""
    session = Session(loaded, SamplingSettings(temperature=1.0, seed=4))
    session.set_prompt(PROMPT)
    for _ in range(3):
        record = session.step().record
    info = loaded.info
    dh = info.d_model // info.n_head
    for layer in range(info.n_layer):
        for head in range(info.n_head):
            keys, _ = session.cached_kv(layer, head)
            q = session.query(layer, head)
            assert q.shape == (dh,) and q.dtype == np.float32
            scores = keys @ q / np.sqrt(dh)
            row = np.exp(scores - scores.max())
            np.testing.assert_allclose(row / row.sum(), record.attn[layer, head, -1].astype(np.float32), atol=1e-3)
    first = session.trace(0).record  # an earlier step: the last prompt position's query
    assert not np.allclose(session.query(0, 0, step=0), session.query(0, 0))
    keys0 = session.cached_kv(0, 0)[0][: first.end]
    scores = keys0 @ session.query(0, 0, step=0) / np.sqrt(dh)
    row = np.exp(scores - scores.max())
    np.testing.assert_allclose(row / row.sum(), first.attn[0, 0, -1].astype(np.float32), atol=1e-3)

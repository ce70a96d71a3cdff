"""Direct logit attribution (engine.attribution): the parts sum to the model's logit, each head's
source split sums to its part, and the parts equal TransformerLens's decompose_resid /
stack_head_results with apply_ln_to_stack, read out on the final norm's weight ⊙ W_U[:, t].

Models: the bundled GPT-2 demo (LayerNorm, a position embedding, b_O), a random GPT-2 at GPT-2
small's shape, a random Llama with grouped heads (4 query / 2 key-value: RMSNorm, no biases), a
random Qwen2 (untied LM head) and a random GraniteMoe (embedding, residual and logit multipliers).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine import SamplingSettings, Session, load_model, paths
from engine.attribution import attribute, attribute_tokens
from engine.random_model import TINY, random_loaded, write_random_model

PROMPT = "The capital of France is the city of"
FAMILIES = ("gpt2", "llama", "qwen2", "granitemoe")


def stepped(loaded, steps: int = 3) -> Session:
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    for _ in range(steps):
        session.step()
    return session


@pytest.fixture(scope="module", params=FAMILIES)
def folder_and_session(request, tmp_path_factory):
    if request.param == "gpt2":
        folder = paths.demo_model_dir()
    else:
        folder = write_random_model(tmp_path_factory.mktemp(request.param) / request.param, request.param,
                                    seed=5, **TINY[request.param])
    return folder, stepped(load_model(str(folder)))


def assert_sums(a, logit: float) -> None:
    """|Σ parts − logit| ≤ 1e-4 · Σ |parts|, and the logit is the model's."""
    magnitude = sum(abs(v) for _, v in a.parts())
    assert abs(a.total - logit) <= 1e-4 * magnitude, f"Σ parts {a.total} != logit {logit} (Σ|parts| {magnitude})"
    assert abs(a.logit - logit) <= 1e-5 * max(1.0, abs(logit))


def test_parts_sum_to_the_chosen_tokens_logit(folder_and_session):
    _, session = folder_and_session
    for step, record in enumerate(session.records):
        a = attribute(session, step)
        assert a.target == record.chosen and a.position == record.end - 1
        assert_sums(a, float(record.logits[record.chosen]))


def test_parts_sum_to_a_candidate_and_to_a_difference(folder_and_session):
    _, session = folder_and_session
    record = session.records[-1]
    first, second = np.argsort(-record.logits)[:2]
    a = attribute(session, target=int(second))
    assert_sums(a, float(record.logits[second]))
    d = attribute(session, target=int(first), versus=int(second))
    assert_sums(d, float(record.logits[first] - record.logits[second]))
    b = attribute(session, target=int(first))
    assert np.allclose(d.heads, b.heads - a.heads, atol=1e-5)  # linear in the readout: what the two share cancels


def test_a_text_the_session_does_not_hold_is_split_the_same_way(folder_and_session):
    """attribute_tokens (a second prompt's run, no session cache) gives the session's own parts on the
    session's own tokens, and sums on another text."""
    _, session = folder_and_session
    record = session.records[-1]
    ids = session.token_ids()[: record.end]
    target, versus = (int(i) for i in np.argsort(-record.logits)[:2])
    a = attribute(session, target=target, versus=versus)
    b, logits = attribute_tokens(session.loaded.model, ids, target, versus, step=a.step)
    assert (b.step, b.position, b.target, b.versus) == (a.step, a.position, target, versus)
    for (key, mine), (_, theirs) in zip(b.parts(), a.parts()):
        assert mine == pytest.approx(theirs, abs=1e-4), key
    np.testing.assert_allclose(b.sources, a.sources, atol=1e-4)
    np.testing.assert_allclose(logits, record.logits, atol=1e-3)
    other = ids.copy()
    other[3] = (other[3] + 17) % 900
    c, other_logits = attribute_tokens(session.loaded.model, other, target, versus)
    assert_sums(c, float(other_logits[target] - other_logits[versus]))
    assert abs(c.logit - a.logit) > 1e-4  # another text: another split


def test_every_head_splits_over_its_sources(folder_and_session):
    _, session = folder_and_session
    a = attribute(session)
    assert a.sources.shape == (*a.heads.shape, a.position + 1)
    scale = np.abs(a.heads).max()
    assert np.abs(a.sources.sum(-1) - a.heads).max() <= 1e-5 * scale
    assert np.abs(a.sources).max() > 1e-3 * scale  # not all on one position: every source is named
    assert np.allclose(a.heads.sum(1) + a.attn_bias, a.attn)


def test_an_earlier_position_is_split_with_its_own_norm_scale(folder_and_session):
    _, session = folder_and_session
    ids = session.token_ids()
    a = attribute(session, 1, position=3)
    assert a.target == ids[4] and a.position == 3
    with torch.inference_mode():
        logits = session.loaded.model(torch.from_numpy(ids[:4])[None]).logits[0, -1].float()
    assert_sums(a, float(logits[ids[4]]))


def test_facts_come_from_the_model(folder_and_session):
    folder, session = folder_and_session
    a = attribute(session)
    config = session.loaded.model.config
    gpt2 = config.model_type == "gpt2"
    assert a.norm_centres == gpt2 and a.has_pos_embed == gpt2 and a.has_attn_bias == gpt2
    assert a.logit_scale == getattr(config, "logits_scaling", 1.0)
    assert (a.norm_shift != 0) == gpt2 == a.has_norm_shift and a.head_bias == 0 and not a.has_head_bias
    assert [key for key, _ in a.parts()].count("norm_shift") == gpt2  # RMSNorm has no shift: no such part
    assert a.kv_head.tolist() == [h // (session.info.n_head // session.info.kv_heads) for h in range(session.info.n_head)]


def test_gpt2_small_shape(tmp_path):
    loaded = random_loaded(tmp_path / "gpt2-small", "gpt2", seed=2, vocab_size=50257)
    session = stepped(loaded, steps=2)
    record = session.records[-1]
    a = attribute(session)
    assert a.heads.shape == (12, 12)
    assert_sums(a, float(record.logits[record.chosen]))
    assert np.abs(a.sources.sum(-1) - a.heads).max() <= 1e-5 * np.abs(a.heads).max()


# ------------------------------------------------------------------ TransformerLens
def test_parts_equal_transformer_lens(folder_and_session):
    """decompose_resid and stack_head_results at the last position, apply_ln=True, on the bridge of
    the same folder's weights (unprocessed), read out on ln_final.w ⊙ (W_U[:, a] - W_U[:, b])."""
    pytest.importorskip("transformer_lens", reason="TransformerLens is not installed: pip install -e '.[parity]'")
    from tests.engine.test_transformer_lens_parity import bridge

    folder, session = folder_and_session
    tl = bridge(folder)
    model = session.loaded.model
    record = session.records[-1]
    first, second = (int(i) for i in np.argsort(-record.logits)[:2])
    with torch.inference_mode():
        _, cache = tl.run_with_cache(torch.from_numpy(session.token_ids()[: record.end])[None])
        stack, labels = cache.decompose_resid(layer=-1, pos_slice=-1, apply_ln=True, return_labels=True)
        heads = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)
    expected_labels = ["embed"] + (["pos_embed"] if "pos_embed" in labels else [])
    expected_labels += [f"{i}_{kind}" for i in range(session.info.n_layer) for kind in ("attn_out", "mlp_out")]
    assert labels == expected_labels
    norm = model.transformer.ln_f if hasattr(model, "transformer") else model.model.norm
    for target, versus in ((first, -1), (first, second)):
        mine = attribute(session, target=target, versus=versus)
        with torch.inference_mode():
            w_u = model.lm_head.weight[target] - (model.lm_head.weight[versus] if versus >= 0 else 0)
            direction = (norm.weight * w_u / getattr(model.config, "logits_scaling", 1.0)).double()  # [d]
        theirs = dict(zip(labels, (stack[:, 0].double() @ direction).tolist()))
        ours = {"embed": mine.embed, "pos_embed": mine.pos_embed} | {
            f"{i}_attn_out": float(mine.attn[i]) for i in range(session.info.n_layer)} | {
            f"{i}_mlp_out": float(mine.mlp[i]) for i in range(session.info.n_layer)}
        assert mine.has_pos_embed == ("pos_embed" in labels)
        worst = max(abs(ours[name] - value) for name, value in theirs.items())
        assert worst <= 1e-5, f"max |engine - TransformerLens| = {worst:.1e}"
        their_heads = (heads[:, 0].double() @ direction).reshape(mine.heads.shape).numpy()
        worst_head = np.abs(mine.heads - their_heads).max()
        assert worst_head <= 1e-5, f"heads: max |engine - TransformerLens| = {worst_head:.1e}"
        print(f"\n{session.info.family} target {target} versus {versus}: parts within {worst:.1e}, heads within {worst_head:.1e}")

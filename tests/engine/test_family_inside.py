"""The RoPE, grouped-head and routing data of one position (engine.family_inside) against the model."""

from __future__ import annotations

import numpy as np
import pytest

from engine import SamplingSettings, Session, families
from engine.errors import SessionError
from engine.family_inside import family_inside
from tests.conftest import FAMILY_PROMPT, stepped_family_session

PROMPT = FAMILY_PROMPT


@pytest.fixture(scope="module", params=("llama", "qwen3", "granitemoe", "mixtral"))
def session(request, tmp_path_factory):
    return stepped_family_session(request.param, tmp_path_factory)[1]


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Turn each pair (i, i + dh/2) of x [..., dh] by angles [dh/2]: the rotation RoPE applies."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def test_rot_q_and_rot_k_are_q_and_k_turned_by_position_times_frequency(session):
    f = family_inside(session)
    assert f.position == session.records[-1].end - 1
    np.testing.assert_allclose(rotate(f.q, f.angles), f.rot_q, atol=1e-4)
    np.testing.assert_allclose(rotate(f.k, f.angles), f.rot_k, atol=1e-4)
    keys, _ = session.cached_kv(1, 0)  # the cache holds the rotated key of this position
    np.testing.assert_allclose(keys[-1], f.rot_k[1, f.kv_head[0]], atol=1e-4)


def test_the_score_depends_on_the_distance_only(session):
    f = family_inside(session)
    q, k = f.q[0, 0], f.k[0, f.kv_head[0]]
    score = lambda p, j: rotate(q, p * f.inv_freq) @ rotate(k, j * f.inv_freq)  # noqa: E731
    assert score(10, 7) == pytest.approx(score(110, 107), abs=1e-4)
    assert score(10, 7) != pytest.approx(score(10, 2), abs=1e-4)


def test_grouped_heads_and_routing(session):
    f = family_inside(session)
    info = session.info
    assert f.kv_head.tolist() == [h // (info.n_head // info.kv_heads) for h in range(info.n_head)]
    assert f.ln1_scale.shape == (info.n_layer,) and (f.ln1_scale > 0).all()
    total, active = families.parameter_counts(session.loaded.model)
    assert (f.total_params, f.active_params) == (total, active)
    if f.router_probs is None:
        assert active == total
        return
    cfg = session.loaded.model.config
    assert f.router_probs.shape == (info.n_layer, cfg.num_local_experts)
    np.testing.assert_allclose(f.router_probs.sum(-1), 1, atol=1e-5)
    top = np.argsort(-f.router_probs, axis=-1)[:, : cfg.num_experts_per_tok]
    assert (np.sort(top, -1) == np.sort(f.experts, -1)).all()  # the chosen experts are the most probable
    chosen = np.take_along_axis(f.router_probs, f.experts, -1)
    np.testing.assert_allclose(f.expert_weights, chosen / chosen.sum(-1, keepdims=True), atol=1e-5)
    assert active < total


def test_gpt2_is_refused(demo_model):
    s = Session(demo_model, SamplingSettings(greedy=True))
    s.set_prompt(PROMPT)
    s.step()
    with pytest.raises(SessionError, match="no rotary positions"):
        family_inside(s)

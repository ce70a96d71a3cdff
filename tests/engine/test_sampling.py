"""Sampling arithmetic, stage by stage, and settings validation."""

import numpy as np
import pytest

from engine import SamplingSettings, SettingsError
from engine.sampling import RANGES, apply_repetition_penalty, apply_top_k, apply_top_p, distribution, draw, softmax

LOGITS = np.array([4.2, 3.1, 2.4, 1.1, 0.6], dtype=np.float32)


def test_softmax_of_known_logits():
    probs = softmax(LOGITS)
    np.testing.assert_allclose(probs, [0.637, 0.212, 0.105, 0.029, 0.017], atol=5e-4)
    assert probs.dtype == np.float32 and abs(probs.sum() - 1) < 1e-6


def test_greedy_takes_the_argmax_and_reports_model_probabilities():
    dist = distribution(LOGITS, np.array([], dtype=np.int64), SamplingSettings(greedy=True))
    assert draw(dist, 0) == 0
    np.testing.assert_allclose(dist.probs, softmax(LOGITS))


def test_temperature_zero_is_greedy():
    settings = SamplingSettings(temperature=0.0)
    assert settings.is_greedy
    assert draw(distribution(LOGITS[::-1].copy(), np.array([]), settings), 3) == 4


def test_temperature_divides_logits():
    dist = distribution(LOGITS, np.array([]), SamplingSettings(temperature=2.0))
    np.testing.assert_allclose(dist.after_temperature, LOGITS / 2)
    np.testing.assert_allclose(dist.probs, softmax(LOGITS / 2), rtol=1e-6)
    assert dist.probs[0] < softmax(LOGITS)[0]  # flatter


def test_top_k_keeps_k_largest():
    out = apply_top_k(LOGITS, 2)
    assert np.isfinite(out).tolist() == [True, True, False, False, False]
    assert apply_top_k(LOGITS, 0) is LOGITS  # 0 means off


def test_top_p_keeps_smallest_set_reaching_p():
    # probabilities 0.637, 0.212, 0.105, ...: 0.637 < 0.8 <= 0.849 -> two tokens
    assert np.isfinite(apply_top_p(LOGITS, 0.8)).sum() == 2
    assert np.isfinite(apply_top_p(LOGITS, 0.6)).sum() == 1
    assert np.isfinite(apply_top_p(LOGITS, 0.95)).sum() == 3
    assert np.isfinite(apply_top_p(LOGITS, 1.0)).sum() == 5


def test_top_p_exact_boundary():
    logits = np.log(np.array([0.5, 0.25, 0.125, 0.125], dtype=np.float32))
    assert np.isfinite(apply_top_p(logits, 0.75)).sum() == 2  # 0.5 + 0.25 reaches 0.75 exactly


def test_stages_compose_in_order():
    context = np.array([0, 3])
    dist = distribution(LOGITS, context, SamplingSettings(repetition_penalty=2.0, temperature=0.5, top_k=3, top_p=0.9))
    np.testing.assert_allclose(dist.after_penalty, [2.1, 3.1, 2.4, 0.55, 0.6])
    np.testing.assert_allclose(dist.after_temperature, dist.after_penalty / 0.5)
    assert np.isfinite(dist.after_top_k).tolist() == [True, True, True, False, False]
    kept = np.isfinite(dist.after_top_p)
    assert kept.tolist() == [False, True, True, False, False]  # 6.2 vs 4.8 vs 4.2 -> 0.72, then 0.9 reached
    assert abs(dist.probs.sum() - 1) < 1e-6 and (dist.probs[~kept] == 0).all()


def test_repetition_penalty_divides_positive_and_multiplies_negative():
    logits = np.array([2.0, -2.0, 1.0], dtype=np.float32)
    out = apply_repetition_penalty(logits, np.array([0, 1, 1]), 2.0)
    np.testing.assert_allclose(out, [1.0, -4.0, 1.0])
    np.testing.assert_array_equal(logits, [2.0, -2.0, 1.0])  # input untouched


def test_seed_replays_and_depends_on_step():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=1000).astype(np.float32)
    settings = SamplingSettings(temperature=1.5, seed=42)
    dist = distribution(logits, np.array([]), settings)
    first = [draw(dist, step) for step in range(20)]
    assert first == [draw(dist, step) for step in range(20)]
    assert len(set(first)) > 5
    other = distribution(logits, np.array([]), SamplingSettings(temperature=1.5, seed=43))
    assert first != [draw(other, step) for step in range(20)]


def test_draws_follow_the_distribution():
    settings = SamplingSettings(temperature=1.0, seed=None)
    dist = distribution(LOGITS, np.array([]), settings)
    counts = np.bincount([draw(dist, 0) for _ in range(4000)], minlength=5) / 4000
    np.testing.assert_allclose(counts, softmax(LOGITS), atol=0.03)


def test_draw_never_picks_a_removed_token():
    settings = SamplingSettings(top_k=2, seed=None)
    dist = distribution(LOGITS, np.array([]), settings)
    assert {draw(dist, 0) for _ in range(500)} <= {0, 1}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"temperature": -0.1}, "between 0 and 100"),
        ({"temperature": float("nan")}, "finite"),
        ({"temperature": 101}, "between 0 and 100"),
        ({"top_k": -1}, "0 or more"),
        ({"top_k": 2.5}, "whole number"),
        ({"top_p": 0.0}, "greater than 0"),
        ({"top_p": 1.5}, "at most 1"),
        ({"repetition_penalty": 0.5}, "between 1 and 10"),
        ({"seed": -3}, "whole number"),
        ({"seed": 2**32}, "whole number"),
        ({"temperature": "hot"}, "a number"),
    ],
)
def test_out_of_range_settings_name_the_range(kwargs, words):
    with pytest.raises(SettingsError, match=words):
        SamplingSettings(**kwargs)


def test_ranges_table_matches_validation():
    low, high = RANGES["temperature"]
    SamplingSettings(temperature=low)
    SamplingSettings(temperature=high)
    SamplingSettings(repetition_penalty=RANGES["repetition_penalty"][1])
    SamplingSettings(seed=RANGES["seed"][1])

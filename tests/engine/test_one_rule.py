"""One rule each, at the edges: ties break by lower token id in every top-n list (the candidates, the
logit lens, the session file's token table), top-k 0 means off, top-p 0 is refused everywhere,
and one default (top-k 50)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.defaults import DEFAULT_SETTINGS
from engine.errors import SettingsError
from engine.inside import top_by_id
from engine.sampling import RANGES, SamplingSettings, distribution, top_ids
from engine.session_write import candidate_ids

TIED = np.zeros(1000, dtype=np.float32)  # every logit equal: any order but by id is a coin toss
TIED[[700, 900]] = 2.0  # two clear winners, then 998 ties


def test_ties_break_by_lower_id_in_every_top_list():
    want = [700, 900, 0, 1, 2, 3, 4, 5]
    assert top_ids(TIED, 8).tolist() == want
    dist = distribution(TIED, np.array([], dtype=np.int64), SamplingSettings(top_k=0, seed=0))
    assert dist.top(8).tolist() == want
    assert dist.top(8, by=dist.after_penalty).tolist() == want
    ids, values = top_by_id(torch.from_numpy(np.stack([TIED, TIED[::-1].copy()])), 8)
    assert ids[0].tolist() == want and ids[1].tolist() == [99, 299, 0, 1, 2, 3, 4, 5]
    assert values[0].tolist() == [2, 2, 0, 0, 0, 0, 0, 0]


def test_the_file_holds_exactly_the_candidates_a_step_lists():
    context = np.array([3, 700], dtype=np.int64)  # the penalty lowers 700 below 900
    dist = distribution(TIED, context, SamplingSettings(repetition_penalty=1.5, top_k=0, seed=0))
    listed = dist.top(64, by=dist.after_penalty)
    np.testing.assert_array_equal(candidate_ids(TIED, context, 1.5, 64), listed)
    assert listed[:3].tolist() == [900, 700, 0]


def test_top_ids_edges():
    assert top_ids(np.array([1.0, 2.0]), 5).tolist() == [1, 0]  # n past the length: all of them
    assert top_ids(np.array([1.0, 2.0]), 0).tolist() == []
    assert top_ids(np.array([-np.inf, 0.0, -np.inf]), 2).tolist() == [1, 0]


def test_top_k_0_is_off_and_1_keeps_one():
    logits = np.array([0.0, 1.0, 1.0, 0.5], dtype=np.float32)
    off = distribution(logits, np.array([]), SamplingSettings(top_k=0, seed=0))
    assert off.kept.all()
    one = distribution(logits, np.array([]), SamplingSettings(top_k=1, seed=0))
    assert one.kept.sum() >= 1 and one.kept[1]  # Hugging Face's top-k keeps ties with the k-th


def test_top_p_0_is_refused_and_its_smallest_value_allowed():
    with pytest.raises(SettingsError, match="top p must be between 0.01 and 1"):
        SamplingSettings(top_p=0.0)
    assert RANGES["top_p"][0] > 0
    smallest = distribution(TIED, np.array([]), SamplingSettings(top_p=RANGES["top_p"][0], top_k=0, seed=0))
    assert smallest.kept.sum() == 2  # the two winners hold 2 * e^2 / (2 * e^2 + 998) > 0.01


def test_one_default():
    assert SamplingSettings().top_k == 50 == DEFAULT_SETTINGS.top_k
    assert DEFAULT_SETTINGS == SamplingSettings()


def test_the_strongest_mlp_units_rank_by_absolute_value():
    from types import SimpleNamespace

    from engine.inside_trace import InsideTrace

    post = np.array([[0.5, -3.0, 2.0, 0.5, -0.1]], dtype=np.float32)
    units, values = InsideTrace.top_units(SimpleNamespace(mlp_post=post), 0, 4)
    assert units.tolist() == [1, 2, 0, 3] and values.tolist() == [-3.0, 2.0, 0.5, 0.5]  # ties by lower index

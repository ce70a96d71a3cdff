"""AttentionHistory: the full matrix of one head from per-step rows, rewriting only what changed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from app.logic.history import AttentionHistory

L, H = 2, 3


def records(rng, prompt: int, steps: int) -> list:
    """A prefill of ``prompt`` rows, then one row per step, each row a softmax over its past."""
    out, start = [], 0
    for n in [prompt] + [1] * steps:
        end = start + n
        attn = np.zeros((L, H, n, end), np.float16)
        for i in range(n):
            w = rng.random((L, H, start + i + 1))
            attn[:, :, i, : start + i + 1] = w / w.sum(-1, keepdims=True)
        out.append(SimpleNamespace(attn=attn, attn_rows=np.arange(start, end), start=start))
        start = end
    return out


def expected(recs, layer: int, head: int) -> np.ndarray:
    T = recs[-1].start + recs[-1].attn.shape[2]
    m = np.full((T, T), np.nan, np.float32)
    for r in recs:
        for i in range(r.attn.shape[2]):
            q = r.start + i
            m[q, : q + 1] = r.attn[layer, head, i, : q + 1]
    return m


def test_a_step_writes_one_row_and_a_rewind_rewrites_from_the_first_changed_row():
    rng = np.random.default_rng(0)
    recs = records(rng, prompt=5, steps=4)  # T = 9
    history = AttentionHistory()
    history.sync(recs[:2])
    np.testing.assert_array_equal(history.matrix(1, 2), expected(recs[:2], 1, 2))
    assert history.fresh_from == 0  # first call: every row
    history.sync(recs[:3])
    np.testing.assert_array_equal(history.matrix(1, 2), expected(recs[:3], 1, 2))
    assert history.fresh_from == 6  # one new row
    history.matrix(1, 2)
    assert history.fresh_from == 7  # nothing new: no row written
    history.sync(recs[:2])  # back one step
    branch = records(np.random.default_rng(1), prompt=5, steps=4)[2:]  # new arrays: new records
    history.sync(recs[:2] + branch)  # a different continuation from row 6 on
    np.testing.assert_array_equal(history.matrix(1, 2), expected(recs[:2] + branch, 1, 2))
    assert history.fresh_from == 6
    history.matrix(0, 0)  # another head: all rows
    assert history.fresh_from == 0
    np.testing.assert_array_equal(history.matrix(0, 0), expected(recs[:2] + branch, 0, 0))


def test_the_matrix_grows_past_its_buffer():
    recs = records(np.random.default_rng(2), prompt=60, steps=10)  # T = 70 > the first 64-row buffer
    history = AttentionHistory()
    for n in range(1, len(recs) + 1):
        history.sync(recs[:n])
        m = history.matrix(0, 1)
    np.testing.assert_array_equal(m, expected(recs, 0, 1))
    assert history.fresh_from == 69


def test_a_sampled_pass_leaves_its_other_rows_to_the_engine():
    """A long prefill keeps a sample of its rows: the others are NaN until the engine's rows of the
    selected head come (add_map); ``missing`` names the pass to ask for, per head."""
    recs = records(np.random.default_rng(3), prompt=8, steps=2)  # T = 10
    full = expected(recs, 1, 2)
    kept = np.array([3, 7])
    sampled = SimpleNamespace(attn=recs[0].attn[:, :, kept], attn_rows=kept, start=0)
    history = AttentionHistory()
    history.sync([sampled] + recs[1:])
    m = history.matrix(1, 2)
    assert history.missing(1, 2) == 0
    assert np.isnan(m[[0, 1, 2, 4, 5, 6]]).all()
    np.testing.assert_array_equal(m[kept], full[kept])
    np.testing.assert_array_equal(m[8:], full[8:])
    assert history.thumbnails(4).shape == (L, H, 4, 4)
    assert not history.add_map(recs[0], 1, 2, recs[0].attn[1, 2])  # not a pass of this history
    assert history.add_map(sampled, 1, 2, recs[0].attn[1, 2])
    np.testing.assert_array_equal(history.matrix(1, 2), full)
    assert history.fresh_from == 0 and history.missing(1, 2) is None
    assert history.missing(0, 0) == 0  # another head needs its own rows
    history.sync(recs)  # a new prefill keeping every row: nothing to ask for, the old rows forgotten
    assert history.missing(1, 2) is None and history._map is None

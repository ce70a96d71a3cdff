"""Sampling arithmetic, stage by stage, and settings validation."""

import math

import numpy as np
import pytest

from engine import SamplingSettings, SettingsError
from engine.sampling import (
    RANGES,
    Distribution,
    apply_repetition_penalty,
    apply_top_k,
    apply_top_p,
    distribution,
    draw,
    random_u,
    softmax,
)

LOGITS = np.array([4.2, 3.1, 2.4, 1.1, 0.6], dtype=np.float32)


def test_softmax_of_known_logits():
    probs = softmax(LOGITS)
    np.testing.assert_allclose(probs, [0.637, 0.212, 0.105, 0.029, 0.017], atol=5e-4)
    assert probs.dtype == np.float32 and abs(probs.sum() - 1) < 1e-6


def test_greedy_takes_the_argmax_and_reports_model_probabilities():
    dist = distribution(LOGITS, np.array([], dtype=np.int64), SamplingSettings(greedy=True))
    assert draw(dist, 0).token == 0 and np.isnan(draw(dist, 0).u)
    np.testing.assert_allclose(dist.probs, softmax(LOGITS))


def test_temperature_zero_is_greedy():
    settings = SamplingSettings(temperature=0.0)
    assert settings.is_greedy
    assert draw(distribution(LOGITS[::-1].copy(), np.array([]), settings), 3).token == 4


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
    first = [draw(dist, step).token for step in range(20)]
    assert first == [draw(dist, step).token for step in range(20)]
    assert len(set(first)) > 5
    other = distribution(logits, np.array([]), SamplingSettings(temperature=1.5, seed=43))
    assert first != [draw(other, step).token for step in range(20)]


def test_draws_follow_the_distribution():
    settings = SamplingSettings(temperature=1.0, seed=None)
    dist = distribution(LOGITS, np.array([]), settings)
    counts = np.bincount([draw(dist, 0).token for _ in range(4000)], minlength=5) / 4000
    np.testing.assert_allclose(counts, softmax(LOGITS), atol=0.03)


def test_draw_never_picks_a_removed_token():
    settings = SamplingSettings(top_k=2, seed=None)
    dist = distribution(LOGITS, np.array([]), settings)
    assert {draw(dist, 0).token for _ in range(500)} <= {0, 1}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"temperature": -0.1}, "between 0 and 100"),
        ({"temperature": float("nan")}, "finite"),
        ({"temperature": 101}, "between 0 and 100"),
        ({"top_k": -1}, "between 0 and 1,000,000 \\(0 means off\\)"),
        ({"top_k": 2.5}, "whole number"),
        ({"top_p": 0.0}, "between 0.01 and 1 \\(1 means off\\)"),
        ({"top_p": 1.5}, "between 0.01 and 1"),
        ({"repetition_penalty": 0.5}, "between 1 and 10"),
        ({"seed": -3}, "whole number"),
        ({"seed": 2**32}, "whole number"),
        ({"temperature": "hot"}, "a number"),
    ],
)
def test_out_of_range_settings_name_the_range(kwargs, words):
    with pytest.raises(SettingsError, match=words):
        SamplingSettings(**kwargs)


@pytest.mark.parametrize("name", list(RANGES))
def test_ranges_table_is_what_validation_allows(name):
    """Both ends of each RANGES entry are accepted, the nearest values outside them refused."""
    low, high = RANGES[name]
    whole = isinstance(low, int)
    assert getattr(SamplingSettings(**{name: low}), name) == low
    assert getattr(SamplingSettings(**{name: high}), name) == high
    below = low - 1 if whole else float(np.nextafter(low, -np.inf))
    above = high + 1 if whole else float(np.nextafter(high, np.inf))
    for outside in (below, above):
        with pytest.raises(SettingsError):
            SamplingSettings(**{name: outside})


# ----------------------------------------------------------- Hugging Face's processors
def hf_stages(logits: np.ndarray, context: np.ndarray, s: SamplingSettings) -> list[np.ndarray]:
    """The same stages through transformers' own processors, in generate's order."""
    import torch
    from transformers.generation.logits_process import (
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    ids = torch.from_numpy(context.astype(np.int64))[None]
    x = torch.from_numpy(logits.copy())[None]
    out = []
    if s.repetition_penalty != 1:
        x = RepetitionPenaltyLogitsProcessor(float(s.repetition_penalty))(ids, x)
    out.append(x[0].numpy().copy())
    x = TemperatureLogitsWarper(float(s.temperature))(ids, x)
    out.append(x[0].numpy().copy())
    if s.top_k:
        x = TopKLogitsWarper(int(s.top_k))(ids, x)  # HF refuses 0: "off" means not applied
    out.append(x[0].numpy().copy())
    if s.top_p < 1:
        x = TopPLogitsWarper(float(s.top_p))(ids, x)
    out.append(x[0].numpy().copy())
    out.append(torch.softmax(x[0], -1).numpy())
    return out


def test_every_stage_equals_hugging_face_processors():
    """2,000 random settings and logit vectors (seeded), 30 % of them rounded to one decimal so that
    ties are common. Penalty, temperature and top-k agree bit for bit. Top-p keeps the same number of
    tokens every time; it differs only in *which* of several tokens tied at the cut survives: HF
    sorts with an unstable torch.sort, the engine keeps the lower token ids (its documented order).
    The final probabilities then agree up to that permutation among equal values."""
    rng = np.random.default_rng(2026)
    tie_cases = 0
    for case in range(2000):
        V = int(rng.choice([3, 40, 1000, 50257], p=[0.15, 0.4, 0.44, 0.01]))
        logits = rng.normal(0, rng.uniform(0.3, 6), V).astype(np.float32)
        if rng.random() < 0.3:
            logits = np.round(logits, 1).astype(np.float32)
        context = rng.integers(0, V, int(rng.integers(0, 40)))
        s = SamplingSettings(
            temperature=float(rng.uniform(0.05, 3)),
            top_k=int(rng.integers(1, V + 2)) if rng.random() < 0.6 else 0,
            top_p=float(rng.uniform(0.02, 1)) if rng.random() < 0.7 else 1.0,
            repetition_penalty=float(rng.uniform(1, 4)) if rng.random() < 0.7 else 1.0,
        )
        dist = distribution(logits, context, s)
        penalty, temperature, top_k, top_p, probs = hf_stages(logits, context, s)
        np.testing.assert_array_equal(dist.after_penalty, penalty, err_msg=f"case {case}")
        np.testing.assert_array_equal(dist.after_temperature, temperature, err_msg=f"case {case}")
        np.testing.assert_array_equal(dist.after_top_k, top_k, err_msg=f"case {case}")
        ours, theirs = dist.kept, np.isfinite(top_p)
        if not np.array_equal(ours, theirs):
            tie_cases += 1
            differ = np.flatnonzero(ours != theirs)
            tied_value = dist.after_top_k[differ[0]]
            assert ours.sum() == theirs.sum(), f"case {case}: top-p kept {ours.sum()} tokens, HF {theirs.sum()}"
            assert (dist.after_top_k[differ] == tied_value).all(), f"case {case}: differs beyond one tie"
            group = np.flatnonzero(dist.after_top_k == tied_value)  # the tie straddling the cut
            kept_in_group = group[ours[group]]
            assert kept_in_group.tolist() == group[: len(kept_in_group)].tolist()  # ours: the lower ids
            np.testing.assert_allclose(np.sort(dist.probs), np.sort(probs), atol=1e-7, err_msg=f"case {case}")
        else:
            np.testing.assert_array_equal(dist.after_top_p[ours], top_p[ours])
            np.testing.assert_allclose(dist.probs, probs, atol=1e-7, rtol=1e-5, err_msg=f"case {case}")
    assert 0 < tie_cases < 200  # the ties were exercised (81 of the 2,000 cases when written)


def test_greedy_equals_hugging_face_argmax():
    rng = np.random.default_rng(3)
    for _ in range(200):
        logits = np.round(rng.normal(0, 2, 300), 1).astype(np.float32)  # ties for the top are common
        context = rng.integers(0, 300, 20)
        s = SamplingSettings(greedy=True, repetition_penalty=float(rng.uniform(1, 3)))
        penalty = hf_stages(logits, context, s)[0]
        assert draw(distribution(logits, context, s), 0).token == int(np.argmax(penalty))


# ------------------------------------------------------------------------ the draw
def reference_pick(probs: np.ndarray, u: float) -> int:
    """The documented rule, written the slow obvious way."""
    ids = np.flatnonzero(probs > 0)
    order = ids[np.lexsort((ids, -probs[ids]))]  # descending probability, ties by lower id
    cumulative = np.cumsum(probs[order].astype(np.float64))
    above = np.flatnonzero(cumulative > u)
    return int(order[above[0]]) if len(above) else int(order[-1])


def test_u_is_the_documented_formula_pinned():
    """u = default_rng([seed, step]).random(), with one known value: seed 42 at step 7 draws
    0.5196307011602563 (the order [7, 42] would give 0.6311650112196174)."""
    assert random_u(SamplingSettings(temperature=1.0, seed=42), 7) == 0.5196307011602563
    assert random_u(SamplingSettings(temperature=1.0, seed=7), 42) == 0.6311650112196174


def test_u_selects_the_token_by_the_documented_rule():
    rng = np.random.default_rng(11)
    for case in range(300):
        V = int(rng.choice([4, 100, 50257], p=[0.45, 0.45, 0.1]))
        logits = rng.normal(0, rng.uniform(0.5, 4), V).astype(np.float32)
        if case % 3 == 0:
            logits = np.round(logits).astype(np.float32)  # many exact ties in probability
        s = SamplingSettings(
            temperature=float(rng.uniform(0.3, 2)), top_k=int(rng.integers(0, 60)), top_p=float(rng.uniform(0.3, 1)), seed=case
        )
        dist = distribution(logits, np.array([], dtype=np.int64), s)
        step = 1000 + 7 * case  # never the seed: [seed, step] and [step, seed] give different u
        drawn = draw(dist, step)
        assert 0 <= drawn.u < 1 and drawn.u == np.random.default_rng([case, step]).random()  # used unscaled
        assert drawn.token == reference_pick(dist.probs, drawn.u)
        for u in rng.random(5):
            assert dist.pick(u) == reference_pick(dist.probs, u)


def test_pick_deep_in_a_flat_distribution_equals_a_full_sort():
    """With no cut and a flat distribution u lands thousands of tokens deep in the order."""
    rng = np.random.default_rng(8)
    logits = rng.normal(0, 1, 50257).astype(np.float32)
    dist = distribution(logits, np.array([], dtype=np.int64), SamplingSettings(temperature=3.0, top_k=0))
    order, cumulative = dist.draw_order()
    for u in [0.0, 0.01, 0.3, 0.77, 0.999, float(cumulative[20_000]), float(np.nextafter(1.0, 0))]:
        assert dist.pick(u) == reference_pick(dist.probs, u) == int(order[min(np.searchsorted(cumulative, u, side="right"), len(order) - 1)])


def test_draw_boundaries_and_rounding():
    logits = np.array([np.log(0.25), np.log(0.5), np.log(0.25), -np.inf], dtype=np.float32)
    dist = distribution(logits, np.array([], dtype=np.int64), SamplingSettings())
    order, cumulative = dist.draw_order()
    assert order.tolist() == [1, 0, 2] and cumulative.tolist() == [0.5, 0.75, 1.0]  # tie 0 vs 2: lower id first
    assert dist.pick(0.0) == 1
    assert dist.pick(0.5) == 0  # u equal to a cumulative value is not below it: the next token
    assert dist.pick(0.7499999) == 0 and dist.pick(0.75) == 2
    short = Distribution(dist.settings, *(dist.probs,) * 4, probs=np.array([0.3, 0.6, 0.0], dtype=np.float32))
    assert short.pick(0.95) == 0  # u beyond the last cumulative value (0.9): the last surviving token


def test_stages_for_the_view():
    logits = np.array([3.0, -1.0, 2.5, 0.5, 1.0, 2.0, -3.0, 0.0], dtype=np.float32)
    context = np.array([0, 1, 1, 7])
    s = SamplingSettings(repetition_penalty=2.0, temperature=0.5, top_k=4, top_p=0.8, seed=1)
    dist = distribution(logits, context, s)
    ids = np.array([0, 1, 2, 5, 4, 3])  # six shown, two left for the rest
    st = dist.stages(ids)
    assert st.penalised.tolist() == [True, True, False, False, False, False]
    np.testing.assert_allclose(st.after_penalty, [1.5, -2.0, 2.5, 2.0, 1.0, 0.5])
    assert st.rest_penalised == 1  # token 7 (logit 0: unchanged, but the penalty applied to it)
    np.testing.assert_allclose(st.after_temperature, st.after_penalty / 0.5)
    # top-k 4 keeps 5, 4, 3, 2 (tokens 2, 5, 0, 4): probabilities 0.644, 0.237, 0.087, 0.032;
    # top-p 0.8 then keeps tokens 2 and 5 (0.644 < 0.8 <= 0.881)
    assert st.removed_by.tolist() == ["top-p", "top-k", "", "", "top-p", "top-k"]
    assert st.rest_removed_by_top_k == 2 and st.rest_removed_by_top_p == 0 and st.rest_tokens == 2
    assert np.isnan(st.top_p_cumulative[1]) and np.isnan(st.top_p_cumulative[5])
    np.testing.assert_allclose(st.top_p_cumulative[[2, 3, 0, 4]], [0.644, 0.881, 0.968, 1.0], atol=1e-3)
    assert st.before_top_p.sum() + st.rest_before_top_p == pytest.approx(1)
    assert st.probs.sum() + st.rest_prob == pytest.approx(1)
    assert st.draw_rank.tolist() == [-1, -1, 0, 1, -1, -1]
    assert st.draw_start[2] == 0 and st.draw_end[2] == st.draw_start[3] and st.draw_end[3] == pytest.approx(1)
    assert np.isnan(st.draw_start[0]) and st.rest_prob == 0
    drawn = draw(dist, 0)
    k = ids.tolist().index(drawn.token)
    assert st.draw_start[k] <= drawn.u < st.draw_end[k]  # a person can see u fall in the chosen segment


def test_stage_sums_match_a_full_sort_at_gpt2_vocabulary():
    rng = np.random.default_rng(5)
    logits = rng.normal(0, 3, 50257).astype(np.float32)
    dist = distribution(logits, rng.integers(0, 50257, 300), SamplingSettings(repetition_penalty=1.3, top_k=0))
    ids = np.concatenate([dist.top(64, by=dist.after_penalty), [int(np.argmin(logits))]])  # one from the far tail
    st = dist.stages(ids)
    order, cumulative = dist.draw_order()
    assert len(order) == 50257
    where = np.empty(50257, dtype=np.int64)
    where[order] = np.arange(50257)
    np.testing.assert_array_equal(st.draw_rank, where[ids])
    np.testing.assert_array_equal(st.draw_end, cumulative[where[ids]])
    assert st.penalised.sum() + st.rest_penalised == len(np.unique(dist.in_context))


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_top_p_line_equals_the_slow_reference(top_p):
    rng = np.random.default_rng(9)
    logits = rng.normal(0, 2, 5000).astype(np.float32)
    dist = distribution(logits, np.array([], dtype=np.int64), SamplingSettings(top_k=400, top_p=top_p))
    before = softmax(dist.after_top_k)  # what top-p reads
    ids = np.flatnonzero(before > 0)
    order = ids[np.lexsort((ids, -before[ids]))]
    line = dict(zip(order.tolist(), np.cumsum(before[order], dtype=np.float64)))
    shown = dist.top(50, by=dist.after_penalty)
    st = dist.stages(shown)
    np.testing.assert_array_equal(st.top_p_cumulative, [line[int(i)] for i in shown])
    np.testing.assert_array_equal(st.before_top_p, before[shown])
    kept = st.removed_by == ""
    assert (st.top_p_cumulative[kept] - st.before_top_p[kept] < top_p - 1e-9).all()  # kept: p not reached before it


def test_model_probabilities_are_the_softmax_of_the_raw_logits():
    from engine.sampling import model_logprob, model_probs

    probs = model_probs(np.array([0.0, np.log(3.0), -np.inf], dtype=np.float32))
    assert probs.dtype == np.float64 and probs == pytest.approx([0.25, 0.75, 0.0])
    assert model_logprob(np.array([1000.0, 0.0], dtype=np.float32), 1) == pytest.approx(-1000.0)  # no underflow
    assert model_probs(np.array([1000.0, 0.0], dtype=np.float32)) == pytest.approx([1.0, 0.0])  # no overflow
    assert model_logprob(np.array([0.0, np.log(3.0)], dtype=np.float32), 0) == pytest.approx(np.log(0.25))


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({}, "temperature 1, top-k 50, seed 0"),
        ({"greedy": True}, "greedy"),
        ({"temperature": 0, "repetition_penalty": 1.3, "top_p": 0.5, "seed": None}, "greedy, repetition penalty 1.3"),
        ({"temperature": 0.7, "top_k": 0, "top_p": 0.9, "repetition_penalty": 2, "seed": None},
         "temperature 0.7, top-p 0.9, repetition penalty 2, unseeded"),
        ({"temperature": 1.5, "top_k": 7, "top_p": 0.25, "seed": 12}, "temperature 1.5, top-k 7, top-p 0.25, seed 12"),
    ],
)
def test_describe_names_each_setting_that_is_on(kwargs, text):
    """Off settings (top-k 0, top-p 1, penalty 1) are left out; a greedy choice names no seed."""
    assert SamplingSettings(**kwargs).describe() == text


def test_entropy_in_bits_ignores_removed_tokens():
    from engine.sampling import entropy_bits

    assert entropy_bits(np.full(4, 0.25, dtype=np.float32)) == pytest.approx(2.0)
    assert entropy_bits(np.array([0.5, 0.0, 0.5, 0.0], dtype=np.float32)) == pytest.approx(1.0)  # 0 log 0 counts as 0
    assert entropy_bits(np.array([1.0, 0.0], dtype=np.float32)) == 0
    dist = distribution(np.log(np.array([0.5, 0.25, 0.25], dtype=np.float32)), np.array([]), SamplingSettings(top_k=0))
    assert dist.entropy_bits() == pytest.approx(1.5)


def test_top_ids_largest_first_ties_by_lower_index():
    from engine.sampling import top_ids

    values = np.array([1.0, 5.0, 3.0, 5.0, 3.0, -2.0], dtype=np.float32)
    assert top_ids(values, 1).tolist() == [1]
    assert top_ids(values, 3).tolist() == [1, 3, 2]  # the n-th (3.0) is in, and of the tie 2 vs 4 the lower
    assert top_ids(values, 100).tolist() == [1, 3, 2, 4, 0, 5]  # n beyond the length: all of them
    for n in (0, -4):
        empty = top_ids(values, n)
        assert empty.shape == (0,) and empty.dtype == np.int64
    assert top_ids(np.zeros(0, dtype=np.float32), 5).shape == (0,)
    assert top_ids(values, 2).dtype == np.int64


def test_top_of_a_distribution_reads_the_final_probabilities_unless_told():
    logits = np.array([0.0, 3.0, 1.0, 2.0], dtype=np.float32)
    dist = distribution(logits, np.array([]), SamplingSettings(top_k=2))
    assert dist.top(4).tolist() == [1, 3, 0, 2]  # removed tokens (probability 0) after, by lower id
    assert dist.top(2, by=-dist.after_penalty).tolist() == [0, 2]


def test_stages_without_a_penalty_mark_context_tokens_but_none_penalised():
    """Penalty 1: the context tokens are shown as in context, none as penalised, and the rest
    touched by the penalty is 0; the arrays have their documented types."""
    dist = distribution(LOGITS, np.array([0, 3, 3, 4]), SamplingSettings(top_k=0, seed=1))
    ids = np.array([3, 1, 0], dtype=np.int32)
    st = dist.stages(ids)
    assert st.ids.tolist() == [3, 1, 0] and st.ids.dtype == np.int64
    assert st.in_context.tolist() == [True, False, True]
    assert st.penalised.tolist() == [False, False, False] and st.penalised.dtype == bool
    assert dist.penalised(ids).dtype == bool
    assert st.rest_penalised == 0 and st.rest_tokens == 2
    assert st.before_top_p.dtype == np.float64 and st.draw_rank.dtype == np.int64
    np.testing.assert_array_equal(st.before_top_p, dist.probs[[3, 1, 0]])  # no top-p: what top-p reads is the end


def test_stages_of_no_candidates_summarise_the_whole_vocabulary():
    dist = distribution(LOGITS, np.array([1]), SamplingSettings(top_k=3, repetition_penalty=1.5))
    st = dist.stages([])
    assert st.ids.shape == (0,) and st.rest_tokens == len(LOGITS) and st.rest_penalised == 1
    assert st.rest_removed_by_top_k == 2 and st.rest_prob == pytest.approx(1)
    assert dist.removed_by([]).shape == (0,)


def test_rest_of_the_bar_is_summed_in_float64():
    """The rest before top-p and at the end are float64 sums, as the draw sums: at GPT-2's
    vocabulary a float32 sum of the whole vocabulary is off by about 6e-11 (seen), a float64 one by under 1e-13."""
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1, 50257).astype(np.float32)
    dist = distribution(logits, np.array([], dtype=np.int64), SamplingSettings(temperature=2.0, top_k=0, top_p=0.95))
    ids = dist.top(10, by=dist.after_penalty)
    st = dist.stages(ids)
    before = softmax(dist.after_top_k).astype(np.float64)
    rest = np.ones(50257, dtype=bool)
    rest[ids] = False
    assert abs(st.rest_before_top_p - math.fsum(before[rest])) < 1e-13
    assert abs(st.rest_prob - math.fsum(dist.probs[rest].astype(np.float64))) < 1e-13


@pytest.mark.parametrize(
    "kwargs, setting, rule",
    [
        ({"greedy": "yes"}, "greedy", "true or false"),
        ({"top_p": "x"}, "top_p", "a number"),
        ({"repetition_penalty": float("inf")}, "repetition_penalty", "a finite number"),
        ({"top_k": 2.5}, "top_k", "a whole number from 0 to 1,000,000"),
        ({"seed": 1.5}, "seed", "a whole number from 0 to 4,294,967,295, or empty for unseeded"),
        ({"temperature": 1e-4}, "temperature", "between 0 and 100 (0 means greedy; the smallest other value is 0.001)"),
    ],
)
def test_a_refused_setting_names_itself_its_rule_and_the_value(kwargs, setting, rule):
    """The message and the error's fields, which a front end reads to name its own flag or control."""
    value = next(iter(kwargs.values()))
    with pytest.raises(SettingsError) as refused:
        SamplingSettings(**kwargs)
    err = refused.value
    assert str(err) == f"{setting.replace('_', ' ')} must be {rule} (got {value!r})"
    assert (err.setting, err.rule, err.value) == (setting, rule, value)


def test_the_smallest_temperature_but_zero_is_allowed():
    from engine.sampling import MIN_TEMPERATURE

    assert SamplingSettings(temperature=MIN_TEMPERATURE).temperature == MIN_TEMPERATURE
    assert SamplingSettings(temperature=0).is_greedy


def test_softmax_of_huge_logits_does_not_overflow():
    np.testing.assert_allclose(softmax(np.array([1000.0, 0.0, -np.inf], dtype=np.float32)), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("settings", [SamplingSettings(greedy=True), SamplingSettings(temperature=0.5)])
def test_a_distribution_has_its_documented_types_whatever_it_is_given(settings):
    """float32 stages and int64 context ids from a float64 list and an empty context; when greedy
    every stage is the penalised logits."""
    dist = distribution([2.0, 1.0, 0.5], [], settings)
    for stage in (dist.after_penalty, dist.after_temperature, dist.after_top_k, dist.after_top_p, dist.probs):
        assert stage.dtype == np.float32 and stage.shape == (3,)
    assert dist.in_context.dtype == np.int64 and dist.in_context.shape == (0,)
    if settings.is_greedy:
        for stage in (dist.after_temperature, dist.after_top_k, dist.after_top_p):
            np.testing.assert_array_equal(stage, dist.after_penalty)
    greedy = distribution(LOGITS, [3, 1, 3], SamplingSettings(greedy=True, repetition_penalty=2.0))
    assert greedy.in_context.tolist() == [1, 3]


def test_the_entropy_of_one_certain_token_is_zero_not_minus_zero():
    """A distribution with one token left prints as 0.00 bits, never -0.00 (the Sampling view said so)."""
    from engine.sampling import entropy_bits

    certain = entropy_bits(np.array([0.0, 1.0, 0.0], np.float32))
    assert certain == 0.0 and math.copysign(1.0, certain) == 1.0 and f"{certain:.2f}" == "0.00"
    assert entropy_bits(np.array([0.5, 0.5])) == 1.0

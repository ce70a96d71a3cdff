"""The Flow's attention maths are the model's: q · k × the model's scale is the recorded score,
its softmax the step record's attention row, |weight × v| the weight times the value's length; for
GPT-2 (a position table), a random Llama (RoPE, grouped heads) and GraniteMoe (attention_multiplier)."""

from __future__ import annotations

import numpy as np
import pytest

from app.host.session_host import make_result
from app.logic.flow_attention_numbers import SHOWN, head_maths, scale_text, table
from app.logic.flow_numbers import flow_numbers
from app.logic.tour import sentence
from engine import SamplingSettings, Session
from engine.inside import inside
from tests.conftest import stepped_family_session


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.fixture(scope="module")
def sessions(demo_model, tmp_path_factory):
    demo = Session(demo_model, SamplingSettings(greedy=True))
    demo.set_prompt("The capital of France is")
    for _ in range(3):
        demo.step()
    out = {"gpt2": demo}
    for family in ("llama", "granitemoe"):
        out[family] = stepped_family_session(family, tmp_path_factory)[1]
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama", "granitemoe"])
def test_the_strip_shows_what_the_model_computed(sessions, family):
    session = sessions[family]
    result = make_result(session)
    record, arch = result.trace.record, result.info.architecture
    pieces = result.trace.pieces
    for layer in range(arch.n_layer):
        trace = inside(session, kv_layers=(layer,))
        assert trace.position == record.end - 1
        for head in range(arch.n_head):
            m = head_maths(trace, layer, head, pieces, arch.score_rule, shown=len(pieces))
            T = record.end
            assert m.n_keys == T and m.rest == 0 and len(m.rows) == T
            rows = sorted(m.rows, key=lambda r: r.position)
            dots = np.array([r.dot for r in rows])
            scores = np.array([r.score for r in rows])
            weights = np.array([r.weight for r in rows])
            assert m.scale == pytest.approx(arch.score_scale, rel=1e-6)  # the model's own factor
            np.testing.assert_allclose(dots * m.scale, scores, rtol=1e-4, atol=1e-5)  # q · k × scale is the score
            recorded = record.attn[layer, head, -1, :T].astype(np.float64)  # what the step itself recorded (float16)
            np.testing.assert_allclose(_softmax(scores), recorded, atol=1e-3)
            np.testing.assert_allclose(weights, recorded, atol=1e-3)
            assert weights.sum() == pytest.approx(1.0, abs=1e-5)
            v = trace.values[0, trace.kv_of(head)]
            np.testing.assert_allclose([r.taken for r in rows], weights * np.linalg.norm(v, axis=-1), rtol=1e-5)
            z = np.einsum("t,td->d", trace.pattern[layer, head].astype(np.float64), v.astype(np.float64))
            assert m.z_norm == pytest.approx(np.linalg.norm(z), rel=1e-3)  # the head's output is the weighted sum
            assert [r.piece for r in rows] == list(pieces[:T])


def test_the_rows_are_the_largest_weights_and_the_rest_adds_up(sessions):
    session = sessions["llama"]
    result = make_result(session)
    trace = inside(session, kv_layers=(1,))
    m = head_maths(trace, 1, 2, result.trace.pieces, result.info.architecture.score_rule)
    weights = trace.pattern[1, 2]
    assert len(m.rows) == SHOWN and m.rest == len(weights) - SHOWN
    assert [r.weight for r in m.rows] == sorted(weights, reverse=True)[:SHOWN]
    assert m.rest_weight + sum(r.weight for r in m.rows) == pytest.approx(1.0, abs=1e-5)
    assert m.kv_head == trace.kv_of(2) and m.rotated
    head, body = table(m, SHOWN + 1)
    assert head[2] == f"÷ √{trace.q.shape[-1]}" and len(body) == SHOWN + 1 and body[-1][0] == f"{m.rest} more"
    assert len(table(m, 3)[1]) == 3
    assert head_maths(trace, 0, 2, result.trace.pieces) is None  # layer 0's keys were not asked for


def test_the_scale_is_named_by_the_model_s_facts(sessions):
    assert scale_text(0.125, 64, "1/sqrt(d_head)") == "÷ √64"
    assert scale_text(0.2, 16, "attention_multiplier") == "× 0.2"
    rule = make_result(sessions["granitemoe"]).info.architecture.score_rule
    assert rule == "attention_multiplier"
    trace = inside(sessions["granitemoe"], kv_layers=(0,))
    m = head_maths(trace, 0, 0, (), rule)
    assert m.scale_text == "× 0.2" and m.rule == "attention_multiplier"
    assert not head_maths(trace, 0, 0, (), rule).rows[0].piece  # no pieces given: none invented


@pytest.mark.parametrize("family", ["gpt2", "llama", "granitemoe"])
def test_the_tour_walks_through_the_table_in_the_model_s_own_terms(sessions, family):
    result = make_result(sessions[family])
    arch = result.info.architecture
    n = flow_numbers(result, 1, 1)
    said = sentence("scores", n)
    assert said.startswith("Head 1, newest token") and f"positions 0 to {n.position}" in said
    assert f"at {n.top_key}: {n.top_weight:.0%}" in said  # the record's own top weight, as the table's first row
    assert ("RoPE" in said) == arch.rotary  # only a rotary model turns q and k
    if family == "granitemoe":
        assert "× 0.2 (the model's attention multiplier)" in said and "√" not in said
    else:
        assert f"÷ √{arch.d_head}" in said


def test_each_column_of_the_table_has_one_format():
    """The numbers of a column line up: the same decimals, the largest with 3 significant figures
    (0.0673 beside 0.08 read as two kinds of number, and the wider one took the keys' room)."""
    from app.logic.flow_attention_numbers import HeadMaths, KeyRow

    rows = tuple(KeyRow(j, f"t{j}", dot, dot / 8, w, taken) for j, (dot, w, taken) in
                 enumerate([(29.8, 0.32, 0.0673), (28.6, 0.28, 0.08), (-5.25, 0.2, 0.0151)]))
    m = HeadMaths(step=0, layer=0, head=0, kv_head=0, position=3, piece="x", n_keys=4, scale=0.125, scale_text="÷ √64",
                  rule="", rotated=True, rows=rows, rest=1, rest_weight=0.2, rest_taken=0.004, z_norm=1.0)
    _head, body = table(m, 4)
    assert [b[1] for b in body[:3]] == ["29.8", "28.6", "-5.2"]
    assert [b[2] for b in body[:3]] == ["3.73", "3.58", "-0.66"]
    assert [b[4] for b in body] == ["0.067", "0.080", "0.015", "0.004"]

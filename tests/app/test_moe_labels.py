"""GraniteMoe's views say what its numbers are: Inside's attention and MLP outputs are what is added to
the residual stream, times its residual multiplier (TransformerLens's hook_attn_out / hook_mlp_out),
and a dense Llama's say nothing of a multiplier."""

from __future__ import annotations

import numpy as np
import pytest

from app.protocol import messages as p
from engine import load_model
from engine.random_model import TINY, write_random_model

from .helpers import run
from .test_inside_view import show_inside


@pytest.fixture(scope="module", params=("granitemoe", "llama"))
def loaded(request, tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp(request.param) / request.param, request.param, seed=3, **TINY[request.param])
    return load_model(str(folder))


@pytest.fixture
def stepped(make_window, qtbot, loaded):
    window = make_window()
    with qtbot.waitSignal(window.resultApplied, timeout=30_000):
        window.load_model(None, loaded=loaded, prompt="The cat sat on the mat")
    return window, run(qtbot, window, window.step, p.Step)


def test_inside_says_the_outputs_include_the_residual_multiplier(stepped, qtbot, loaded):
    window, result = stepped
    window.state.set_layer(1)
    t = show_inside(window, qtbot)
    inside = window.inside
    np.testing.assert_array_equal(inside.attention.attn_out.values, t.attn_out[1])
    np.testing.assert_array_equal(inside.mlp.mlp_out.values, t.mlp_out[1])
    attn, mlp = inside.attention.attn_out.caption.text(), inside.mlp.mlp_out.caption.text()
    multiplier = getattr(loaded.model.config, "residual_multiplier", None)
    if multiplier is None:
        assert t.residual_multiplier == 1.0 and "multiplier" not in attn + mlp
        return
    assert t.residual_multiplier == multiplier == TINY["granitemoe"]["residual_multiplier"]
    for text in (attn, mlp):
        assert f"(its output times the model's residual multiplier {multiplier:g})" in text


def test_the_flows_moe_line_names_the_experts_the_model_chose(stepped, qtbot):
    from app.logic.flow_numbers import flow_numbers
    from app.logic.flow_texts import flow_texts

    window, result = stepped
    window.state.set_layer(1)
    t = show_inside(window, qtbot)  # the newest position, recomputed by the engine's own path (engine.inside)
    assert t.position == result.trace.record.end - 1
    n = flow_numbers(result, layer=1)
    line = flow_texts(n)["mlp"]
    if t.experts is None:
        assert result.trace.record.experts is None and n.experts is None and "experts" not in line
        return
    np.testing.assert_array_equal(result.trace.record.experts, t.experts)  # [L, k]: what the router chose
    np.testing.assert_array_equal(n.experts, t.experts[1])
    assert line.startswith("experts " + ", ".join(str(int(e)) for e in t.experts[1]) + " add ")

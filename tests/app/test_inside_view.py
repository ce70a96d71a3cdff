"""The Inside view draws what the engine recomputed, and agrees with the other panels."""

from __future__ import annotations

import numpy as np

from .helpers import run
from app.protocol import messages as p


def show_inside(window, qtbot):
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.show_view("inside")
    qtbot.waitUntil(lambda: not window.inside.awaiting(), timeout=30_000)
    return answer.args[0].trace


def test_the_inside_view_shows_the_newest_position_and_agrees_with_the_attention_panel(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, window.step, p.Step)
    window.state.set_layer(1)
    window.state.set_head(2)
    trace = show_inside(window, qtbot)
    T = result.trace.record.end
    assert trace.step == result.trace.step and trace.position == T - 1
    inside = window.inside
    attention_row = result.records[-1].attn[1, 2, -1].astype(np.float32)  # float16 in the record
    np.testing.assert_allclose(inside.attention.pattern.values, attention_row[:T], atol=1e-3)
    np.testing.assert_array_equal(inside.attention.q_strip.values, trace.q[1, 2])
    np.testing.assert_array_equal(inside.embedding.sum_strip.values, trace.token_embed + trace.pos_embed)
    assert f"position {T - 1}" in inside.header.text() and "block 1" in inside.pages.names[1]
    assert inside.lens.table.rowCount() == result.n_layer + 1
    assert f"{result.info.n_params:,}" in inside.sizes.text.text()


def test_choosing_a_token_or_a_layer_asks_again(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    show_inside(window, qtbot)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.state.set_position(2)  # a click on the third chip
    assert answer.args[0].trace.position == 2
    qtbot.waitUntil(lambda: not window.inside.awaiting(), timeout=30_000)
    assert "position 2" in window.inside.header.text()
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.state.set_layer(3)
    assert answer.args[0].trace.kv_layers == (3,)
    assert window.inside.attention.keys_image.image.shape == (3, answer.args[0].trace.q.shape[-1])  # positions 0-2 x d_head


def test_an_earlier_step_of_the_history_can_be_opened(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    run(qtbot, window, window.step, p.Step)
    show_inside(window, qtbot)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.inside.step_spin.setValue(0)  # the prefill, while step 1 stays on screen
    trace = answer.args[0].trace
    assert trace.step == 0 and trace.position == 4  # the prompt's last position
    assert window.state.result.trace.step == 1

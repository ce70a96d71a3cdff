"""The Flow's head maths in the window: asked of the engine only while the Flow is on screen and
Play is not running, once per step and layer (another head reuses the answer), drawn for the step
the flow shows, with room in the expanded block at classroom sizes."""

from __future__ import annotations

import numpy as np
import pytest

from app.logic.flow_attention_numbers import table
from app.logic.flow_layout import block_numbers, layout
from app.protocol import messages as p
from tests.app.helpers import run


def _answered(qtbot, window):
    with qtbot.waitSignal(window.flow_view.flow.maths.changed, timeout=20_000):
        pass
    return window.flow_view.flow.maths.maths


def test_the_strip_asks_once_per_step_and_layer_and_shows_the_recorded_weights(window, qtbot):
    source = window.flow_view.flow.maths
    asked = []
    source.inspectRequested.connect(lambda *a: asked.append(a))
    window.show_view("overview")
    run(qtbot, window, window.step, p.Step)
    assert asked == []  # hidden: the Flow costs the engine nothing
    with qtbot.waitSignal(source.changed, timeout=20_000):
        window.show_view("flow")
    record = window.state.result.trace.record
    assert asked == [(record.step, record.end - 1, window.state.layer)]
    m = source.maths
    row = record.attn[m.layer, m.head, -1, : record.end].astype(np.float64)
    assert m.rows[0].weight == pytest.approx(row.max(), abs=1e-3) and m.rows[0].position == int(np.argmax(row))
    head, body = table(m, 3)
    assert head[1] == "q·k" and body[0][0] == f"{m.rows[0].piece} {m.rows[0].position}"
    with qtbot.waitSignal(source.changed, timeout=5_000):
        window.state.set_head(1)  # another head of the same layer: the answer held has it
    assert len(asked) == 1 and source.maths.head == 1
    with qtbot.waitSignal(source.changed, timeout=20_000):
        window.state.set_layer(1)  # another layer: its keys and values are asked for
    assert len(asked) == 2 and asked[-1][2] == 1
    qtbot.waitUntil(lambda: source.maths is not None and source.maths.layer == 1, timeout=20_000)
    source.set_playing(True)
    run(qtbot, window, window.step, p.Step)
    assert len(asked) == 2 and source.maths is None  # Play runs: nothing asked, the last step's maths not shown
    with qtbot.waitSignal(source.changed, timeout=20_000):
        source.set_playing(False)
    assert len(asked) == 3 and source.maths.step == window.state.result.trace.step


@pytest.mark.parametrize("size, line, n_layer", [((1270, 420), 22, 30), ((1010, 450), 20, 30), ((1350, 470), 17, 12),
                                                  ((1010, 420), 24, 12)])
def test_the_expanded_block_has_room_for_the_maths(size, line, n_layer):
    """At least the column heads and two keys, in a box of its own under the blocks and the KV
    cache columns, as wide as both, which end above it (nothing drawn over the KV cache); the
    expanded block keeps its lines; the block numbers as often as without it (every 5th at worst)."""
    lay = layout(*size, n_layer, line, 7)
    x, y, w, h = lay.parts["maths"]
    ex, ey, ew, eh = lay.block_rows[7]
    kx, ky, kw, kh = lay.kv_rows[7]
    assert h >= 3 * line and lay.parts["mlp"][1] + line <= ey + eh
    assert x == ex and x + w == kx + kw and y + h <= lay.height
    for name in ("blocks", "kv"):
        bx, by, bw, bh = lay.boxes[name]
        assert by + bh < y and max(r[1] + r[3] for r in lay.block_rows) <= by + bh
    numbers = block_numbers(lay.block_rows, lay.expanded, line)
    layers = [layer for layer, _ in numbers]
    assert min(b - a for a, b in zip(layers, layers[1:])) in (1, 2, 5)
    tour = layout(*size, n_layer, line, 7, caption_lines=3)
    assert tour.parts["maths"][3] >= 3 * line  # the tour reads the table out: it keeps it


def test_the_flow_s_temperature_and_top_k_resample_and_stay_in_step_with_the_sampling_panel(window, qtbot):
    from engine.sampling import SamplingSettings
    from tests.app.helpers import choose_settings

    choose_settings(window.sampling, SamplingSettings(temperature=1.0, top_k=50, top_p=1.0, seed=3))
    window.show_view("flow")
    run(qtbot, window, window.step, p.Step)
    controls = window.flow_view.flow.sampling_controls
    assert controls.isVisible() and controls.temperature.value() == 1.0 and controls.top_k.value() == 50
    before = window.state.result.trace.distribution.probs.copy()
    result = run(qtbot, window, lambda: controls.temperature.setValue(0.5), p.Resample)
    assert result.settings.temperature == 0.5 and result.trace.record.settings.temperature == 0.5
    assert window.sampling.temperature.value() == 0.5 and window.controller.settings.temperature == 0.5
    assert result.trace.distribution.probs.max() > before.max()  # colder: the top candidate's bar grows
    result = run(qtbot, window, lambda: controls.top_k.setValue(3), p.Resample)
    assert window.sampling.top_k.value() == 3 and int((result.trace.distribution.probs > 0).sum()) <= 3
    run(qtbot, window, lambda: window.sampling.top_k.setValue(7), p.Resample)  # the other way: the panel's change shows here
    assert controls.top_k.value() == 7
    run(qtbot, window, lambda: window.sampling.greedy.setChecked(True), p.Resample)
    assert not controls.temperature.isEnabled() and not controls.top_k.isEnabled()


@pytest.mark.parametrize("size, projector", [((1280, 720), True), ((1024, 768), True), ((1366, 768), False)])
def test_the_controls_are_labelled_on_a_line_of_their_own_in_the_sampling_box(window, qtbot, size, projector):
    """Temperature and top-k each carry a word a class reads ("temperature" or "temp", "top-k"),
    not a bare number, on the sampling box's first line under its title; the stages' rows are
    painted under them, none behind a control; every digit shows."""
    window.show_view("flow")
    run(qtbot, window, window.step, p.Step)
    window.state.set_projector(projector)
    window.resize(*size)
    qtbot.wait(50)
    panel = window.flow_view.flow
    lay = panel.flow_layout()
    controls = panel.sampling_controls
    g = controls.geometry()
    x, y, w, h = lay.boxes["sampling"]
    assert controls.temperature.prefix().strip() in ("temperature", "temp")
    assert controls.top_k.prefix().strip() == "top-k"
    assert g.left() >= x and g.right() < x + w and g.top() >= y + lay.pad + lay.line - 2 and g.bottom() < y + h
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QFontMetrics

    from app.logic.flow_picture import texts_of

    rows = [item for item in texts_of(panel.picture()) if item.role == "sampling_row"]
    assert rows and not any(g.intersects(QRect(*item.rect)) for item in rows)
    for spin in (controls.temperature, controls.top_k):  # every digit shows
        text_w = QFontMetrics(spin.font()).horizontalAdvance(spin.text())
        assert spin.lineEdit().width() >= text_w, spin.text()


def test_the_maths_table_names_its_keys_on_a_1024_x_768_projector(qapp):
    """The key column names each key's token (its position after it where there is room), never
    a bare position, in the projector font at 1024 x 768 with 30 blocks: the numbers' columns
    keep to one format and leave the keys their room."""
    from PySide6.QtGui import QFontMetrics

    from app.logic.flow_attention_numbers import HeadMaths, KeyRow
    from app.logic.flow_picture import maths_picture
    from app.logic.text_fit import Fitter
    from app.window.theme import PROJECTOR

    metrics = {bold: QFontMetrics(PROJECTOR.font(-1, bold)) for bold in (False, True)}
    fitter = Fitter(lambda text, bold: metrics[bold].horizontalAdvance(text))
    line = max(m.height() for m in metrics.values())
    lay = layout(1010, 470, 30, line, 0)
    pieces = ["The", "␣capital", "␣of", "␣France", "␣is", "␣Paris"]
    numbers = [(29.8, 0.32, 0.0673), (25.9, 0.2, 0.0756), (20.2, 0.097, 0.0225), (28.6, 0.28, 0.08), (16.6, 0.062, 0.0151)]
    rows = tuple(KeyRow(j, pieces[j], dot, dot / 8, w, taken) for j, (dot, w, taken) in enumerate(numbers))
    m = HeadMaths(step=2, layer=0, head=0, kv_head=0, position=6, piece="↵", n_keys=7, scale=0.125, scale_text="÷ √64",
                  rule="", rotated=True, rows=rows, rest=2, rest_weight=0.04, rest_taken=0.01, z_norm=1.0)
    items = maths_picture(lay.parts["maths"], m, "", line, fitter, metrics[False].horizontalAdvance(" ") + 2, lay.pad)
    keys = [item.text for item in items if item.role == "maths_row" and item.kind == "text" and not item.right]
    assert keys and all(not key.isdigit() for key in keys), keys
    assert keys[:2] == ["The 0", "␣capital 1"] or keys[1] == "␣capital", keys
    # one way for the whole column: SmolLM2's step read "The 0", "␣is 4", "␣capital", "␣France", "␣Paris 5",
    # as if two keys had no position; every key has its position, or none has
    named = [key for key in keys if not key.startswith("+") and not key.endswith(" more")]
    assert len({key.rsplit(" ", 1)[-1].isdigit() for key in named}) == 1, keys


def test_a_chat_turn_s_shorter_flow_still_has_the_maths():
    """A chat turn's chips take two rows, leaving the Flow about 370 px at 1280 x 720 projector:
    the table still gets its box (the collapsed blocks then numbered every 10th)."""
    lay = layout(1268, 372, 30, 22, 0)
    assert lay.parts["maths"][3] >= 3 * 22
    layers = [layer for layer, _ in block_numbers(lay.block_rows, lay.expanded, 22)]
    assert layers and min(b - a for a, b in zip(layers, layers[1:])) <= 10


def test_the_demo_models_negative_scores_leave_the_keys_their_tokens(qapp):
    """GPT-2's scores are negative and three decimals wide: the softmax column is headed "weight"
    where "softmax" would leave a key its position alone ("1" for "␣capital")."""
    from PySide6.QtGui import QFontMetrics

    from app.logic.flow_attention_numbers import HeadMaths, KeyRow
    from app.logic.flow_picture import maths_picture
    from app.logic.text_fit import Fitter
    from app.window.theme import PROJECTOR

    metrics = {bold: QFontMetrics(PROJECTOR.font(0, bold)) for bold in (False, True)}  # 4 blocks: the Flow's font a point larger
    fitter = Fitter(lambda text, bold: metrics[bold].horizontalAdvance(text))
    line = max(m.height() for m in metrics.values())
    lay = layout(1010, 470, 4, line, 0)
    pieces = ["The", "␣capital", "␣of", "␣France", "␣is", "␣of", "␣for"]
    numbers = [(1, -11.8, 0.18, 0.181), (3, -12.4, 0.17, 0.162), (6, -13.3, 0.15, 0.166), (5, -13.9, 0.14, 0.126)]
    rows = tuple(KeyRow(j, pieces[j], dot, dot / 8, w, taken) for j, dot, w, taken in numbers)
    m = HeadMaths(step=2, layer=0, head=0, kv_head=0, position=6, piece="␣for", n_keys=7, scale=0.125, scale_text="÷ √64",
                  rule="", rotated=False, rows=rows, rest=3, rest_weight=0.36, rest_taken=0.3, z_norm=1.0)
    items = maths_picture(lay.parts["maths"], m, "", line, fitter, metrics[False].horizontalAdvance(" ") + 2, lay.pad)
    keys = [item.text for item in items if item.role == "maths_row" and item.kind == "text" and not item.right]
    assert keys[:4] and all(not key.isdigit() for key in keys[:4]), keys


def test_a_click_on_the_maths_table_opens_that_head_inside(window, qtbot):
    from PySide6.QtCore import QPoint, Qt

    window.show_view("flow")
    run(qtbot, window, window.step, p.Step)
    window.state.set_projector(True)
    window.resize(1280, 720)
    qtbot.wait(50)
    panel = window.flow_view.flow
    window.state.set_layer(1)
    window.state.set_head(2)
    x, y, w, h = panel.flow_layout().parts["maths"]
    with qtbot.waitSignal(panel.openRequested, timeout=2_000) as opened:
        qtbot.mouseClick(panel, Qt.LeftButton, pos=QPoint(x + w // 2, y + h // 2))
    place = opened.args[0]
    assert (place.view, place.layer, place.head, place.newest) == ("inside", 1, 2, True)

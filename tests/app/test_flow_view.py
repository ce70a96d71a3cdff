"""The Flow view: every stage on screen without scrolling at classroom sizes and model depths, each
box opens its place in the detail views and the way back returns; the tour's keys; readable fonts."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontInfo

from app.logic.flow_layout import LINES, STAGES, layout
from app.logic.tour import STAGES as TOUR_STAGES
from app.logic.views import VIEWS
from app.protocol import messages as p
from tests.app.helpers import run
from tests.conftest import make_tiny_folder

SIZES = [((1280, 720), True), ((1366, 768), False), ((1920, 1080), False)]


@pytest.fixture(scope="module")
def deep_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("flow-models")
    return {n: make_tiny_folder(root / f"gpt2-{n}", n_layer=n, n_head=4) for n in (2, 12, 24)}


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def check_on_screen(window, n_layer: int, projector: bool) -> None:
    """Every box of the flow inside the window's visible area, apart, with the lines it needs."""
    panel = window.flow_view.flow
    assert panel.isVisible() and window.flow_view.tokens.isVisible()  # the prompt stays on screen
    assert window.commands.step_action.isEnabled() or window.state.result.stopped
    for action in (window.commands.step_action, window.commands.back_action, window.commands.play_action):  # on the toolbar, not behind »
        button = window.toolbar.widgetForAction(action)
        assert button is not None and button.isVisible()
    lay = panel.flow_layout()
    assert len(lay.block_rows) == len(lay.kv_rows) == n_layer
    origin = panel.mapTo(window, QPoint(0, 0))
    screen = window.centralWidget().geometry()
    for name in STAGES:
        x, y, w, h = lay.boxes[name]
        assert w > 0 and h > 0, name
        assert screen.contains(origin.x() + x, origin.y() + y) and screen.contains(origin.x() + x + w - 1, origin.y() + y + h - 1), name
        if name in LINES:
            assert lay.lines[name] >= LINES[name][0] and h >= lay.box_height(LINES[name][0]), name
    for a in STAGES:
        for b in STAGES:
            if a < b:
                assert not _overlap(lay.boxes[a], lay.boxes[b]), (a, b)
    blocks = lay.boxes["blocks"]
    for r in lay.block_rows:  # every block a row of its own, inside the blocks' box
        assert r[3] >= 2 and r[1] >= blocks[1] and r[1] + r[3] <= blocks[1] + blocks[3]
    assert lay.block_rows[lay.expanded][3] >= lay.box_height(4) - lay.line
    floor = 18 if projector else 11
    for font in (panel.body_font, panel.title_font):
        assert QFontInfo(font).pixelSize() >= floor
    assert lay.line >= QFontInfo(panel.body_font).pixelSize()


@pytest.mark.parametrize("n_layer", [2, 12, 24])
def test_every_stage_is_on_screen_at_classroom_sizes(make_window, qtbot, deep_dirs, n_layer):
    window = make_window()
    run(qtbot, window, lambda: window.load_model(str(deep_dirs[n_layer]), prompt="The capital of France is"), p.Load)
    for _ in range(2):
        run(qtbot, window, window.step, p.Step)
    window.show_view("flow")
    for (w, h), projector in SIZES:
        window.commands.projector_action.setChecked(projector)
        window.state.set_projector(projector)
        window.resize(w, h)
        qtbot.wait(50)
        for layer in (0, n_layer - 1):
            window.state.set_layer(layer)
            check_on_screen(window, n_layer, projector)
        window.tour.start()  # its sentence takes a band at the bottom: every stage still on screen
        check_on_screen(window, n_layer, projector)
        lay = window.flow_view.flow.flow_layout()
        assert lay.caption is not None and all(r[1] + r[3] <= lay.caption[1] for r in lay.boxes.values())
        window.tour.stop()


def test_the_pure_layout_fits_the_stack_for_many_layers():
    for n_layer in (1, 2, 12, 24, 48):
        lay = layout(1200, 420, n_layer, 26, selected=n_layer // 2, caption_lines=3)
        assert lay.caption is not None and lay.caption[1] + lay.caption[3] <= 420
        bottom = max(r[1] + r[3] for r in lay.block_rows)
        assert bottom <= lay.boxes["blocks"][1] + lay.boxes["blocks"][3]
        assert all(r[1] + r[3] <= lay.caption[1] for r in lay.boxes.values())


EXPECTED = {  # box: the view it opens
    "tokens": "overview", "embedding": "inside", "blocks": "inside", "kv": "cache", "ln_final": "inside",
    "lm_head": "inside", "logits": "overview", "sampling": "sampling", "chosen": "sampling", "appended": "overview",
}


def test_each_box_opens_its_place_and_the_way_back_returns(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    window.show_view("flow")
    window.resize(1366, 768)
    qtbot.wait(50)
    panel = window.flow_view.flow
    for box, view in EXPECTED.items():
        window.state.set_head(1)
        window.state.set_layer(2)  # the embedding's box opens layer 0: block 2 expanded again
        lay = panel.flow_layout()
        x, y, w, h = lay.block_rows[2] if box == "blocks" else lay.kv_rows[2] if box == "kv" else lay.boxes[box]
        qtbot.mouseClick(panel, Qt.LeftButton, pos=QPoint(x + w // 2, y + h // 2))
        assert window.views.currentIndex() == list(VIEWS).index(view), box
        if box == "blocks":  # Inside at that layer and head, at the newest position
            assert (window.state.layer, window.state.head) == (2, 1)
            assert window.state.selected_position == window.state.result.context_len - 1
        back = window.toolbar.widgetForAction(window.flow_back_action)
        assert back.isVisible()
        if box in ("tokens", "sampling"):
            qtbot.keyClick(window, Qt.Key_F)  # the key
        else:
            qtbot.mouseClick(back, Qt.LeftButton)  # the button
        assert window.views.currentIndex() == list(VIEWS).index("flow") and panel.isVisible(), box
    # a head of the expanded block: selected here
    window.state.set_layer(2)
    hx, hy, hw, hh = panel.flow_layout().parts["heads"]
    qtbot.mouseClick(panel, Qt.LeftButton, pos=QPoint(hx + hw - 2, hy + hh // 2))
    assert window.state.head == window.state.result.n_head - 1 and panel.isVisible()
    # a collapsed block: the first click expands it, the second opens it
    lay = panel.flow_layout()
    x, y, w, h = lay.block_rows[0]
    qtbot.mouseClick(panel, Qt.LeftButton, pos=QPoint(x + w // 2, y + h // 2))
    assert window.state.layer == 0 and panel.isVisible()


def test_the_tour_keys_move_the_highlight_and_leave_stepping_alone(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    window.show_view("overview")
    tour = window.tour
    qtbot.keyClick(window, Qt.Key_T)
    assert tour.running and window.flow_view.isVisible() and window.flow_view.tour_button.isChecked()
    panel = window.flow_view.flow
    assert panel.tour_box == TOUR_STAGES[0][1] and panel.tour_text.startswith("1/")
    step = window.state.result.trace.step
    qtbot.keyClick(window, Qt.Key_Right)
    qtbot.keyClick(window, Qt.Key_PageDown)
    assert tour.tour.index == 2 and panel.tour_box == TOUR_STAGES[2][1]
    qtbot.keyClick(window, Qt.Key_Left)
    assert tour.tour.index == 1
    qtbot.keyClick(window, Qt.Key_PageUp)
    assert tour.tour.index == 0
    assert window.state.result.trace.step == step  # the arrows moved the tour, not the text
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Space), p.Step)  # Space still steps
    assert window.state.result.trace.step == step + 1 and tour.running
    assert f"token {window.state.result.trace.record.input_ids[-1]} " in panel.tour_text
    qtbot.keyClick(window, Qt.Key_Escape)
    assert not tour.running and panel.tour_box is None and not window.flow_view.tour_button.isChecked()
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Right), p.Step)  # → steps again
    assert window.state.result.trace.step == step + 2
    qtbot.mouseClick(window.flow_view.tour_button, Qt.LeftButton)  # the button enters and leaves too
    assert tour.running
    qtbot.mouseClick(window.flow_view.tour_button, Qt.LeftButton)
    assert not tour.running


def test_the_flow_reads_nothing_while_hidden(window, qtbot):
    window.show_view("overview")
    run(qtbot, window, window.step, p.Step)
    panel = window.flow_view.flow
    assert panel._dirty  # the step waits for the view to be shown
    window.show_view("flow")
    qtbot.wait(50)
    assert not panel._dirty and panel.numbers.step == window.state.result.trace.step


def test_the_overview_draws_a_step_only_once_it_is_shown(window, qtbot):
    window.show_view("flow")
    run(qtbot, window, window.step, p.Step)
    drawn = window.attention.history.length
    run(qtbot, window, window.step, p.Step)
    assert window.attention.history.length == drawn  # hidden: the step waits
    window.show_view("overview")
    assert window.attention.history.length == window.state.result.context_len  # shown: the newest step
    run(qtbot, window, window.step, p.Step)
    assert window.attention.history.length == window.state.result.context_len  # on screen: every step


def test_typing_f_and_t_in_the_prompt_types_them(window, qtbot):
    window.show_view("flow")
    editor = window.tokens.editor
    editor.setFocus()
    editor.moveCursor(editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(editor, " Ft")
    assert editor.toPlainText().endswith(" Ft")
    assert window.flow_view.isVisible() and not window.tour.running


@pytest.mark.parametrize("n_layer, line, most", [(12, 26, 5), (30, 22, 5), (30, 26, 10)])
def test_collapsed_blocks_carry_their_layer_numbers_a_line_apart(n_layer, line, most):
    """Every block, or every 2nd (5th, 10th, ...) where the rows are thin, numbered in a line of its own
    that neither overlaps another number nor the expanded block; at 1280 x 720 in projector mode
    (lines of 22 px) SmolLM2's 30 blocks are numbered 0, 5, 10, ... so a teacher can say "look at
    block 17"; with a larger font the head's maths keeps its box and the blocks are numbered every
    10th."""
    from app.logic.flow_layout import block_numbers, layout

    selected = 7
    lay = layout(1270, 430, n_layer, line, selected)
    assert "maths" in lay.parts
    numbers = block_numbers(lay.block_rows, lay.expanded, line)
    layers = [layer for layer, _ in numbers]
    assert selected not in layers and len(layers) >= n_layer // most - 1
    every = min(b - a for a, b in zip(layers, layers[1:]))
    allowed = (1, 2, 5, 10)[:(1, 2, 5, 10).index(most) + 1]
    assert all(layer % every == 0 for layer in layers) and (every in allowed or all(layer % most == 0 for layer in layers))
    ex, ey, ew, eh = lay.block_rows[selected]
    rects = [r for _, r in numbers]
    for (x, y, w, h), (_, y2, _, _) in zip(rects, rects[1:]):
        assert y + h <= y2  # a line apart
    assert all(y + h <= ey or y >= ey + eh for _, y, _, h in rects)
    for layer, (x, y, w, h) in numbers:  # each on its own block's row
        bx, by, bw, bh = lay.block_rows[layer]
        assert y <= by + bh // 2 <= y + h


def test_the_tour_asks_for_the_split_only_on_its_why_stage_and_reads_it_out(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    tour, asked = window.tour, []
    tour.attributeRequested.connect(lambda *args: asked.append(args))
    tour.start(len(TOUR_STAGES) - 2)  # appended: nothing is asked
    assert not asked and not tour.awaiting()
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000):
        qtbot.keyClick(window, Qt.Key_Right)  # why
    trace = window.state.result.trace
    assert asked == [(trace.step, trace.record.end - 1, -1, -1)]
    qtbot.waitUntil(lambda: "Largest pushes" in window.flow_view.flow.tour_text, timeout=10_000)
    rec = trace.record
    assert f"Its logit {float(rec.logits[rec.chosen]):.2f} " in window.flow_view.flow.tour_text
    qtbot.keyClick(window, Qt.Key_Left)
    qtbot.keyClick(window, Qt.Key_Right)  # back on why, same step: the split held is read again, not asked
    assert len(asked) == 1 and "Largest pushes" in window.flow_view.flow.tour_text
    run(qtbot, window, window.controller.reset, p.Reset)  # the text starts over: the split held is of none of it
    assert tour.why is None and "Largest pushes" not in window.flow_view.flow.tour_text
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000):
        run(qtbot, window, window.step, p.Step)  # the same step and position again: asked again
    assert len(asked) == 2
    tour.stop()

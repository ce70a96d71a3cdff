"""The attention map read from the back of the room: every query row and key column
named by its token when the labels fit (always at up to 32 positions once the map is focused), a
subset that never collides otherwise, labels inside the widget and off the map, the map growing
with focus, and the heat maps' outline drawn outside the rows it frames."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRectF

from app.protocol import messages as p
from app.panels.heatmap import Frame
from app.panels.token_axis import choose_cells, nice_step

from .helpers import run

TWELVE = "The cat sat on the mat and looked out of the"  # 11 tokens, 12+ positions after steps
THIRTY = ("In a quiet village by the sea, an old fisherman told the children stories about the storms he had "
          "seen and the")  # 23 tokens: 27 positions after 4 steps


def test_nice_steps_and_the_cells_chosen():
    assert [nice_step(s) for s in (0.3, 1, 1.2, 2, 2.5, 4.9, 7, 11, 30)] == [1, 1, 2, 2, 5, 5, 10, 20, 50]
    assert choose_cells(0, 31, 15, 14) == list(range(32))  # a label per cell when they fit
    cells = choose_cells(0, 29, 7, 20, always=[29, 13])
    assert 29 in cells and 13 in cells
    assert all((b - a) * 7 >= 20 for a, b in zip(cells, cells[1:]))  # never closer than a label
    assert set(cells) - {29, 13} <= set(range(0, 30, 5))  # every 5th (20/7 -> 5) around them
    assert choose_cells(3, 2, 10, 10) == []


def _prompt(qtbot, window, text: str, steps: int) -> None:
    run(qtbot, window, lambda: window.tokens.editor.setPlainText(text), p.SetPrompt)
    for _ in range(steps):
        run(qtbot, window, window.step, p.Step)


def _settle(window, qtbot) -> None:
    qtbot.waitUntil(lambda: window.painter._turns is None, timeout=5_000)
    qtbot.wait(20)
    window.attention.view.repaint()


def _focused_map(window, qtbot, text: str, projector: bool, size: tuple[int, int], steps: int = 4):
    """The attention panel focused at ``size`` (``projector`` mode or not) after ``text`` and ``steps`` steps."""
    window.state.set_projector(projector)
    window.resize(*size)
    _prompt(qtbot, window, text, steps)
    window.focus.toggle(window.attention)
    _settle(window, qtbot)
    return window.attention


def _labels(panel) -> dict[str, list[tuple[int, str, QRectF]]]:
    """Each axis's labels as placed at its size now, their rectangles in the view's pixels."""
    out = {}
    for name, axes in (("rows", (panel.rows_axis, panel.rows_right)), ("keys", (panel.keys_axis,))):
        out[name] = sorted((cell, text, axis.mapRectToScene(rect)) for axis in axes for cell, text, rect in axis.layout_labels())
    return out


def _key_title(panel) -> tuple[str, QRectF]:
    """The key axis's title and where its text is drawn, in the view's pixels."""
    label = panel.keys_axis.label
    m = label.document().documentMargin()
    return panel.keys_axis.labelText, label.mapRectToScene(label.boundingRect().adjusted(m, m, -m, -m))


def _label_problems(panel) -> list[str]:
    """Labels (and the key axis's title) over each other, over the map, or outside the widget."""
    placed = _labels(panel)
    everything = placed["rows"] + placed["keys"] + [(-1, *_key_title(panel))]
    area = panel.plot.getViewBox().sceneBoundingRect()
    viewport = panel.view.viewport().rect()
    problems = []
    for i, (cell, text, rect) in enumerate(everything):
        problems += [f"{text!r} overlaps {other!r}" for _c, other, box in everything[i + 1 :] if rect.intersects(box)]
        if rect.intersects(area.adjusted(1, 1, -1, -1)):
            problems.append(f"{text!r} {rect.getRect()} lies over the map {area.getRect()}")
        if not QRectF(viewport).adjusted(-0.5, -0.5, 0.5, 0.5).contains(rect):
            problems.append(f"{text!r} {rect.getRect()} outside the widget {viewport.getRect()}")
    return problems


@pytest.mark.parametrize("projector, size", [(False, (1366, 768)), (False, (1024, 768)), (True, (1280, 720))],
                         ids=["1366x768", "1024x768", "projector-1280x720"])
def test_focused_every_row_and_key_is_named_without_collisions(window, qtbot, projector, size):
    panel = _focused_map(window, qtbot, TWELVE, projector, size)
    T = panel.history.length
    assert 12 <= T <= 32
    placed = _labels(panel)
    assert [c for c, _t, _r in placed["rows"]] == list(range(T))
    assert [c for c, _t, _r in placed["keys"]] == list(range(T))
    pieces = window.state.result.trace.pieces
    for cell, text, _rect in placed["rows"] + placed["keys"]:
        shown = text.removeprefix("▶ ").removeprefix("◀ ").rsplit(" ", 1)
        assert shown[-1] == str(cell)  # "piece position", or the position alone: a piece is never cut
        assert len(shown) == 1 or shown[0] == pieces[cell]
    assert any("␣" in text for _c, text, _r in placed["keys"])  # spaces shown as the chips show them
    assert [text[:2] in ("▶ ", "◀ ") for _c, text, _r in placed["rows"]] == [c == T - 1 for c in range(T)]
    assert _label_problems(panel) == []
    floor = 18 if projector else 11
    for axis in (panel.rows_axis, panel.keys_axis):
        assert axis.style["tickFont"].pixelSize() >= floor


def test_thirty_positions_focused_on_a_projector_names_every_row_from_both_sides_and_every_key(window, qtbot):
    panel = _focused_map(window, qtbot, THIRTY, True, (1280, 720))
    T = panel.history.length
    assert 25 <= T <= 32
    placed = _labels(panel)
    assert [c for c, _t, _r in placed["keys"]] == list(range(T))
    assert [c for c, _t, _r in placed["rows"]] == list(range(T))  # named from both sides
    assert panel.rows_right.isVisible() and len(panel.rows_right.placed) == T // 2
    assert _label_problems(panel) == []


def test_a_small_map_names_a_subset_always_with_the_newest_row_and_the_strongest_key(window, qtbot):
    window.resize(1366, 768)
    _prompt(qtbot, window, THIRTY, 4)
    panel = window.attention
    _settle(window, qtbot)
    T = panel.history.length
    placed = _labels(panel)
    rows = [c for c, _t, _r in placed["rows"]]
    keys = [c for c, _t, _r in placed["keys"]]
    assert len(rows) < T and T - 1 in rows  # the map is too small for every row: a subset
    strongest = int(np.nanargmax(panel.shown[T - 1]))
    assert strongest in keys
    assert _label_problems(panel) == []
    window.state.set_position(3)  # another row selected: it is named and marked
    _settle(window, qtbot)
    placed = _labels(panel)
    marked = [c for c, text, _r in placed["rows"] if text.startswith("▶ ")]
    assert marked == [3] and int(np.nanargmax(panel.shown[3])) in [c for c, _t, _r in placed["keys"]]
    assert _label_problems(panel) == []


def test_the_map_grows_when_its_panel_is_focused(window, qtbot):
    """Focused, the map is large and every key is named; back among the others it has its size again
    (the Overview's splitters get back the sizes they had before the focus: shared again from their
    weights, the map came back a few px shorter)."""
    window.resize(1366, 768)
    _prompt(qtbot, window, TWELVE, 2)
    panel = window.attention
    _settle(window, qtbot)
    before = panel.plot.getViewBox().sceneBoundingRect()
    before_keys = len(_labels(panel)["keys"])
    pages = window.overview.pages
    assert panel.side.isVisible()  # every head's overview beside the map
    window.focus.toggle(panel)
    _settle(window, qtbot)
    after = panel.plot.getViewBox().sceneBoundingRect()
    assert after.width() > 2 * before.width() and after.height() > 2 * before.height()
    assert before_keys < panel.history.length == len(_labels(panel)["keys"])  # a subset among the panels, all when focused
    assert panel.keys_axis.turned() and not panel.side.isVisible()  # focused: the map alone, its key labels turned
    window.focus.toggle(panel)
    _settle(window, qtbot)  # back among the others: back to its size
    assert window.overview.pages == pages and panel.side.isVisible()
    qtbot.waitUntil(lambda: abs(panel.plot.getViewBox().sceneBoundingRect().height() - before.height()) <= 2, timeout=3_000)


def test_the_frame_of_the_newest_row_leaves_its_cells_visible(qtbot):
    """A heat map of 200 rows 1-2 px tall: the framed row's pixels keep the image's colour."""
    view = pg.PlotWidget()
    qtbot.addWidget(view)
    view.resize(300, 300)
    plot = view.getPlotItem()
    plot.invertY(True)
    rows = 200
    values = np.zeros((rows, 8, 4), np.uint8)
    values[..., 3] = 255
    values[-1, :, 1] = 255  # the newest row green, every other black
    image = pg.ImageItem(values)
    plot.addItem(image)
    frame = Frame()
    frame.setPen(pg.mkPen((255, 0, 0), width=2))
    frame.setRect(QRectF(0, rows - 1, 8, 1))
    plot.addItem(frame)
    plot.setRange(xRange=(-1, 9), yRange=(-5, rows + 5), padding=0)
    view.show()
    qtbot.waitExposed(view)
    grabbed = view.grab().toImage()
    cells = image.mapRectToScene(QRectF(0, rows - 1, 8, 1))
    y = int(cells.center().y())
    row = [grabbed.pixelColor(x, y).getRgb()[:3] for x in range(int(cells.left()) + 2, int(cells.right()) - 1)]
    assert row and all(g > 200 and r < 60 for r, g, _b in row), row  # the row keeps its colour: no red over it
    above = [grabbed.pixelColor(x, yy).getRgb()[:3] for x in range(int(cells.left()) + 2, int(cells.right()) - 1)
             for yy in range(int(cells.top()) - 5, int(cells.top()))]
    assert any(r > 200 and g < 80 for r, g, _b in above)  # the frame is there, just above


FORTY = ("In a quiet village by the sea, an old fisherman told the children long stories about the storms he had "
         "seen, the ships that never came back home, and the lights that moved on the water at night")


@pytest.mark.parametrize("projector, size", [(False, (1366, 768)), (True, (1280, 720))], ids=["1366x768", "projector-1280x720"])
def test_above_32_positions_a_readable_subset_without_collisions(window, qtbot, projector, size):
    window.state.set_projector(projector)
    window.resize(*size)
    _prompt(qtbot, window, FORTY, 1)
    panel = window.attention
    T = panel.history.length
    assert T > 32
    for focused in (False, True):
        if focused:
            window.focus.toggle(panel)
        _settle(window, qtbot)
        placed = _labels(panel)
        rows = [c for c, _t, _r in placed["rows"]]
        keys = [c for c, _t, _r in placed["keys"]]
        assert T - 1 in rows and int(np.nanargmax(panel.shown[T - 1])) in keys
        assert len(rows) >= 4 and len(keys) >= (T // 4 if focused else 1)  # a subset, more when focused
        assert _label_problems(panel) == [], focused


THIRTY_TWO = ("In a quiet village by the sea, an old fisherman told the children long stories about the storms he "
              "had seen and the ships that never came back home")  # 30 positions after the prefill, 32 after 3 steps


def _assert_every_cell_named(panel, pieces, projector: bool) -> None:
    """Every row and key of the map named by its token ("piece position", the position alone where the
    piece does not fit whole), at the mode's least size or more, with no label over another, over the
    map or clipped."""
    T = panel.history.length
    placed = _labels(panel)
    assert [c for c, _t, _r in placed["rows"]] == list(range(T)), T
    assert [c for c, _t, _r in placed["keys"]] == list(range(T)), T
    for cell, text, _rect in placed["rows"] + placed["keys"]:
        shown = text.removeprefix("▶ ").removeprefix("◀ ").rsplit(" ", 1)
        assert shown[-1] == str(cell)
        assert len(shown) == 1 or shown[0] == pieces[cell]
    assert _label_problems(panel) == [], T
    for axis in (panel.rows_axis, panel.rows_right, panel.keys_axis):
        assert axis.style["tickFont"].pixelSize() >= (18 if projector else 11)


@pytest.mark.parametrize("projector, size", [(True, (1280, 720)), (False, (1366, 768)), (False, (1024, 768))],
                         ids=["projector-1280x720", "1366x768", "1024x768"])
def test_thirty_two_positions_focused_every_row_and_key_is_named(window, qtbot, projector, size):
    panel = _focused_map(window, qtbot, THIRTY_TWO, projector, size, steps=3)
    assert panel.history.length == 32
    _assert_every_cell_named(panel, window.state.result.trace.pieces, projector)
    assert panel.keys_axis.title_aside()  # turned key labels, their title in the corner beside them
    bare = [text for _c, text, _r in _labels(panel)["keys"] if " " not in text.removeprefix("▶ ")]
    assert len(bare) <= 2, bare  # the words whole, but for the longest (" fisherman"), left out
    assert not any("…" in text for _c, text, _r in _labels(panel)["keys"] + _labels(panel)["rows"])


def test_focused_on_a_projector_every_length_up_to_thirty_two_is_named(window, qtbot):
    """Prompts of the first n words, then the whole text stepped to 32 positions, every row and key
    named: every length from 24 on, where the rows come closest, and every third one below."""
    window.state.set_projector(True)
    window.resize(1280, 720)
    words = THIRTY_TWO.split(" ")
    seen = set()

    def check() -> None:
        if window.focus.focused is not window.attention:
            window.focus.toggle(window.attention)
        _settle(window, qtbot)
        seen.add(window.attention.history.length)
        _assert_every_cell_named(window.attention, window.state.result.trace.pieces, True)

    for n in sorted({*range(2, len(words) - 6, 3), *range(len(words) - 6, len(words) + 1)}):
        _prompt(qtbot, window, " ".join(words[:n]), 1)
        check()
    for _ in range(2):  # the whole text's 30 positions, then 31 and 32
        run(qtbot, window, window.step, p.Step)
        check()
    assert {2, 12, 18} | set(range(24, 33)) <= seen, sorted(seen)

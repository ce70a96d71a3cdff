"""The Overview's "All heads" tiles: every layer x head of a 30-layer model, each tile drawn at least
as large as the projector's smallest text (18 px; 8 px in normal mode), so that it can be read and clicked; the
layers the column has no room for scroll, and the selected head's tile scrolls into view."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from app.protocol import messages as p

from .helpers import run_outside_a_test
from .test_screens import settle

CASES = [((1280, 720), True), ((1024, 768), True), ((1366, 768), False)]
IDS = ["1280x720-projector", "1024x768-projector", "1366x768-normal"]


@pytest.fixture(scope="module")
def smollm_window(module_window, smollm_loaded):
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=smollm_loaded, prompt="The capital of France is"), p.Load, 60_000)
    run_outside_a_test(window, window.step, p.Step)
    return window


def shown_overview(window, qtbot, size, projector):
    window.state.set_projector(projector)
    window.resize(*size)
    window.show_view("overview")
    panel = window.attention
    for page, columns in enumerate(window.overview.pages):  # the page the attention panel is on
        if any(panel in column for column in columns):
            window.overview.show_page(page)
    qtbot.waitUntil(lambda: panel.overview_scroll.isVisible())
    qtbot.wait(20)
    settle(window, qtbot)
    return panel


@pytest.mark.parametrize(("size", "projector"), CASES, ids=IDS)
def test_every_tile_is_as_large_as_the_smallest_text_and_a_click_selects_it(smollm_window, qtbot, size, projector):
    window = smollm_window
    panel = shown_overview(window, qtbot, size, projector)
    floor = 18 if projector else 8
    assert panel.tile_px() == floor
    boxes = panel.tile_boxes()
    assert len(boxes) == 30 * 9
    small = {key: (round(b.width(), 1), round(b.height(), 1)) for key, b in boxes.items() if b.width() < floor or b.height() < floor}
    assert small == {}
    width = panel.overview_scroll.viewport().width()
    assert all(b.right() <= width + 1 for b in boxes.values())  # every head side by side, no sideways scrolling
    for layer, head in [(0, 0), (17, 4), (29, 8), (3, 7)]:
        box = panel.tile_boxes()[(layer, head)]
        panel.overview_scroll.ensureVisible(int(box.center().x()), int(box.center().y()), 30, 30)
        qtbot.wait(10)
        box = panel.tile_boxes()[(layer, head)]
        qtbot.mouseClick(panel.overview_view.viewport(), Qt.LeftButton, pos=QPoint(int(box.center().x()), int(box.center().y())))
        assert (window.state.layer, window.state.head) == (layer, head)


def test_the_selected_heads_tile_scrolls_into_view(smollm_window, qtbot):
    window = smollm_window
    panel = shown_overview(window, qtbot, (1280, 720), True)
    seen = panel.overview_scroll.viewport().rect()
    for layer in (29, 0, 15):
        window.state.set_layer(layer)
        qtbot.wait(10)
        box = panel.tile_boxes()[(layer, window.state.head)]
        top_left = panel.overview_view.mapTo(panel.overview_scroll.viewport(), box.topLeft().toPoint())
        assert seen.contains(top_left) and seen.contains(top_left + QPoint(int(box.width()) - 1, int(box.height()) - 1))


def test_the_pages_are_planned_again_when_a_panels_least_size_grows(qtbot):
    """A step that makes a panel need more room (another row of chips, a longer caption) re-plans the
    Overview's pages: the column it shared no longer fits, so its panels get a column each. Planned
    only on a resize, the panels of that column were drawn over each other."""
    from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

    from app.window.overview_pages import OverviewPages

    def panel(name):
        box = QWidget()
        box.short_title = name
        box.grow = QLabel(name)
        box.grow.setMinimumSize(100, 100)
        QVBoxLayout(box).addWidget(box.grow)
        return box

    a, b, c = panel("a"), panel("b"), panel("c")
    pages = OverviewPages([[a, b], [c]], {})
    window = QWidget()  # a window of a fixed size: the area cannot grow to the panels' needs
    window.setFixedSize(400, 300)
    layout = QVBoxLayout(window)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(pages)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert pages.pages == [[[a, b], [c]]]
    a.grow.setMinimumHeight(200)  # a's contents need more: a and b no longer fit one above the other
    qtbot.waitUntil(lambda: pages.pages != [[[a, b], [c]]], timeout=2_000)
    assert [p for page in pages.pages for column in page for p in column] == [a, b, c]
    assert all(len(column) == 1 for page in pages.pages for column in page)
    assert a.height() >= a.minimumSizeHint().height()

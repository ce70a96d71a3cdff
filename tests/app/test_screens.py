"""Every screen a classroom has: at each size, in normal and projector mode, every plot's drawing
area and every label has the room its content needs, measured with the widgets' own geometry and
font metrics (no pixel comparisons). Also: focusing one panel, full screen, the clicker's keys and
the window reopening where it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel, QSplitter, QStyle, QStyleOptionGroupBox, QTabWidget, QToolButton

from app.panels.tokens_panel import CHIP_SHARE, MIN_ROWS

from .helpers import run
from app.protocol import messages as p

ROOT = Path(__file__).resolve().parents[2]
SIZES = [(1024, 768), (1280, 720), (1280, 800), (1366, 768), (1600, 900), (1920, 1080), (2560, 1440)]


def label_problems(label: QLabel) -> list[str]:
    """Why ``label`` (shown) cannot show all of its text, if it cannot."""
    if not label.text():
        return []
    name = f"{type(label.parent()).__name__} label {label.text()[:40]!r} {label.size().toTuple()}"
    if label.wordWrap():
        need = label.heightForWidth(label.width())
        return [f"{name}: needs {need} px of height"] if label.height() < need else []
    hint = label.sizeHint()
    if label.width() < hint.width() or label.height() < label.fontMetrics().height():
        return [f"{name}: needs {hint.toTuple()}"]
    return []


def plot_problems(panel) -> list[str]:
    """Why a plot of ``panel`` is smaller than it can be read, or its titles are cut, if so."""
    problems = []
    for plot, (width, height) in panel.plot_needs():
        area = plot.getViewBox().sceneBoundingRect()
        if area.width() < width - 1 or area.height() < height - 1:
            problems.append(f"{panel.short_title}: drawing area {area.width():.0f} x {area.height():.0f} < {width} x {height}")
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            if axis.isVisible() and axis.label.isVisible() and axis.labelText:
                text = axis.label.boundingRect().width()
                length = axis.geometry().height() if name == "left" else axis.geometry().width()
                if text > length:
                    problems.append(f"{panel.short_title}: {name} axis title {axis.labelText!r} {text:.0f} px > {length:.0f} px")
                view = plot.scene().views()[0]
                box = axis.label.sceneBoundingRect()
                if box.bottom() > view.viewport().height() + 0.5 or box.right() > view.viewport().width() + 0.5:
                    problems.append(f"{panel.short_title}: {name} axis title {axis.labelText!r} ends outside its view")
        texts = [item for item in plot.items if isinstance(item, pg.TextItem) and item.isVisible() and item.toPlainText()]
        for text in texts:
            text.updateTransform(force=True)  # pyqtgraph places a TextItem when it paints: place it now
        boxes = [(t.toPlainText(), _ink_box(t)) for t in texts]
        for i, (a, box) in enumerate(boxes):
            problems += [f"{panel.short_title}: {a!r} overlaps {b!r}" for b, other in boxes[i + 1 :] if box.intersects(other)]
            inside = plot.getViewBox().sceneBoundingRect().adjusted(-1, -1, 1, 1)
            if not inside.contains(box):
                problems.append(f"{panel.short_title}: {a!r} sticks out of its plot {box.getRect()} {inside.getRect()}")
        if plot.titleLabel.isVisible() and plot.titleLabel.text:
            view = plot.scene().views()[0]
            box = plot.titleLabel.item.sceneBoundingRect()
            if box.left() < -0.5 or box.right() > view.viewport().width() + 0.5:
                problems.append(f"{panel.short_title}: title {plot.titleLabel.text[:30]!r} is cut by its view")
    return problems


def _ink_box(text: pg.TextItem):
    """Where ``text``'s lines are drawn, in scene pixels (its box less the document's margins)."""
    item = text.textItem
    m = item.document().documentMargin()
    return item.mapRectToScene(item.boundingRect().adjusted(m, m, -m, -m))


def settle(window, qtbot) -> None:
    """Wait until the window has laid out and painted what it shows (pyqtgraph places its text
    items as it paints)."""
    qtbot.waitUntil(lambda: window.painter._turns is None, timeout=5_000)
    qtbot.wait(5)
    for view in window.painter.views:
        if view.isVisible():
            view.repaint()


def window_problems(window, qtbot) -> list[str]:
    """Every panel on every page: what does not have room."""
    problems = []
    stages = window.overview
    for page in range(len(stages.pages)):
        stages.show_page(page)
        settle(window, qtbot)
        for panel in (window.tokens, *(p for column in stages.pages[page] for p in column)):
            assert panel.isVisible(), panel.short_title
            need = panel.minimumSizeHint()
            if panel.width() < need.width() or panel.height() < need.height():  # squeezed: its widgets overlap
                problems.append(f"{panel.short_title}: {panel.size().toTuple()} < its minimum {need.toTuple()}")
            problems += plot_problems(panel)
            problems += [p for label in panel.findChildren(QLabel) if label.isVisible() for p in label_problems(label)]
    problems += [p for label in (window.status_line.status_label, window.status_line.model_label) for p in label_problems(label)]
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("projector", [False, True], ids=["normal", "projector"])
def test_every_plot_and_label_has_room_at_every_size(window, qtbot, projector):
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    window.state.set_projector(projector)
    problems = []
    for size in SIZES:
        window.resize(*size)
        qtbot.wait(10)
        settle(window, qtbot)
        if window.size().toTuple() != size: problems.append(f"{size}: window {window.size().toTuple()}")  # no minimum size forces a larger window
        problems += [f"{size}: {p}" for p in window_problems(window, qtbot)]
        # the chips take the rows they need and no more: no empty band under them
        tokens = window.tokens
        assert tokens.scroll.height() <= tokens.strip.height() + 2 * tokens.scroll.frameWidth()
    assert problems == [], "\n".join(problems)
    # the common laptop screen shows every panel at once in normal mode
    window.resize(1366, 768)
    qtbot.wait(30)
    assert (len(window.overview.pages) == 1) is (not projector)


LONG_PROMPT = ("In a quiet village by the sea, an old fisherman told the children stories about the storms he had "
               "seen and the ships that never came back home again")


@pytest.mark.slow
@pytest.mark.parametrize("projector", [False, True], ids=["normal", "projector"])
def test_a_long_prompt_keeps_the_window_its_size(window, qtbot, projector):
    """Three rows of chips pushed a 1280 x 720 projector window to 799 px: the chips take at most
    a share of the height and scroll beyond it."""
    window.state.set_projector(projector)
    run(qtbot, window, lambda: window.tokens.editor.setPlainText(LONG_PROMPT), p.SetPrompt)
    run(qtbot, window, window.step, p.Step)
    problems = []
    for size in [(1024, 768), (1280, 720), (1366, 768)]:
        window.resize(*size)
        qtbot.wait(10)
        settle(window, qtbot)
        if window.size().toTuple() != size:
            problems.append(f"{size}: window {window.size().toTuple()}")
        problems += [f"{size}: {p}" for p in window_problems(window, qtbot)]
        tokens = window.tokens  # the chips take at most their share of the height (two rows at least) and scroll
        room = max(CHIP_SHARE * size[1], tokens.strip.rows_height(MIN_ROWS)) + 2 * tokens.scroll.frameWidth()
        if tokens.scroll.height() > room:
            problems.append(f"{size}: the chips take {tokens.scroll.height()} px, more than {room:.0f}")
    assert problems == [], "\n".join(problems)


def test_on_a_narrow_screen_buttons_choose_the_page_of_panels(window, qtbot):
    """At 1024 x 768 the panels take more than one page: a row of buttons, one per page and named for
    its panels, shows one page at a time (a click, or Ctrl+Tab and Ctrl+Shift+Tab: Space is Step in
    this window), with no QTabWidget anywhere (its tab bar cost about 10 ms a drawn step)."""
    window.resize(1024, 768)
    qtbot.wait(30)
    stages = window.overview
    pages = stages.pages
    assert len(pages) > 1 and not window.findChildren(QTabWidget)
    buttons = [stages.page_buttons.button(i) for i in range(len(pages))]
    assert len(stages.page_buttons.buttons()) == len(pages) and stages.page_bar.isVisible()
    assert [b.text() for b in buttons] == [" · ".join(p.short_title for c in page for p in c) for page in pages]

    def shown() -> int:
        """The one page whose panels are visible, and whose button alone is checked."""
        visible = [i for i, page in enumerate(pages) if all(p.isVisible() for c in page for p in c)]
        hidden = [i for i, page in enumerate(pages) if not any(p.isVisible() for c in page for p in c)]
        assert len(visible) == 1 and len(hidden) == len(pages) - 1
        assert [b.isChecked() for b in buttons] == [i == visible[0] for i in range(len(pages))]
        return visible[0]

    assert shown() == 0
    qtbot.mouseClick(buttons[-1], Qt.LeftButton)
    assert shown() == len(pages) - 1 == stages.current_page
    window.attention.setFocus()
    qtbot.keyClick(window, Qt.Key_Tab, Qt.ControlModifier)  # the next page, round to the first
    assert shown() == 0
    qtbot.keyClick(window, Qt.Key_Tab, Qt.ControlModifier)
    assert shown() == 1
    qtbot.keyClick(window, Qt.Key_Backtab, Qt.ControlModifier | Qt.ShiftModifier)
    assert shown() == 0
    stages.show_panel(window.kv)
    assert shown() == stages.page_of(window.kv) > 0
    stages.relayout(force=True)  # new pages and buttons: the old ones are not drawn while they wait to be deleted
    buttons = stages.page_buttons.buttons()
    assert not [b for b in stages.page_bar.findChildren(QToolButton) if b not in buttons and not b.isHidden()]
    rows = stages.stack.findChildren(QSplitter, options=Qt.FindDirectChildrenOnly)
    assert not [row for row in rows if row is not stages.stack.currentWidget() and not row.isHidden()]
    window.resize(1600, 1000)  # everything fits one page: no buttons
    qtbot.wait(30)
    assert len(stages.pages) == 1 and not stages.page_bar.isVisible()


def test_focusing_a_panel_fills_the_window_and_comes_back(window, qtbot):
    window.resize(1366, 768)
    qtbot.wait(10)
    everything = window.overview.pages
    attention = window.attention
    option = QStyleOptionGroupBox()
    attention.initStyleOption(option)
    title = attention.style().subControlRect(QStyle.CC_GroupBox, option, QStyle.SC_GroupBoxLabel, attention)
    qtbot.mouseDClick(attention, Qt.LeftButton, pos=title.center())
    assert window.overview.pages == [[[attention]]] and not window.tokens.isVisible()
    qtbot.wait(10)
    assert attention.width() > 0.9 * window.width()
    qtbot.mouseDClick(attention, Qt.LeftButton, pos=title.center())
    assert window.overview.pages == everything and window.tokens.isVisible()
    window.focus.toggle(window.tokens)
    qtbot.wait(10)  # the prompt alone: its chips take the height
    assert not window.overview.isVisible() and window.tokens.height() > 0.7 * window.height()
    qtbot.keyClick(window, Qt.Key_Escape)
    qtbot.wait(10)
    assert window.overview.isVisible() and window.overview.pages == everything


def test_full_screen_and_clicker_keys(window, qtbot):
    window.commands.full_screen_action.trigger()
    assert window.isFullScreen()
    window.commands.full_screen_action.trigger()
    assert not window.isFullScreen()
    window.attention.setFocus()
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_PageDown), p.Step)
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_PageDown), p.Step)
    result = run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_PageUp), p.Back)
    assert result.trace.step == 0


def test_the_window_reopens_where_it_was(make_window, qtbot):
    first = make_window(remember=True)
    first.move(QPoint(37, 41))
    first.resize(700, 640)  # the offscreen platform's screen is 800 x 800: restoring keeps the window on it
    qtbot.wait(10)
    where = first.geometry()
    first.close()
    second = make_window(remember=True)
    assert second.preferences.restore_geometry(second)
    assert second.geometry().size() == where.size() and second.geometry().topLeft() == where.topLeft()


@pytest.mark.slow
def test_a_screenshot_at_a_device_pixel_ratio_of_2_has_twice_the_pixels(tmp_path):
    shot = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QT_SCALE_FACTOR="2", HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "app", "--engine", "thread", "--smoke-test", "--projector", "--size", "1280x720", "--screenshot", str(shot)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    image = QImage(str(shot))
    assert (image.width(), image.height()) == (2560, 1440)

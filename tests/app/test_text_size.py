"""Readable from the back of the room: no text anywhere in the window (panels, axes, legends, tables,
the ? and F1 dialogs, tooltips) is smaller than the mode's floor, 18 px in projector mode at
1280 x 720 and 11 px in normal mode at 1024 x 768; no label or button cuts its text; no two texts of
a plot overlap. Every view, every page of the Overview and every page of Inside is walked."""

from __future__ import annotations

import re

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QFont, QFontInfo
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTableView,
    QTextEdit,
    QToolTip,
    QWidget,
)

from app.window import theme as th
from app.logic.views import VIEWS

from app.protocol import messages as p

from .helpers import run
from .test_inside_view import show_inside
from .test_screens import _ink_box, label_problems, settle

CASES = [((1280, 720), True), ((1024, 768), False)]  # (size, projector)


def font_px(font: QFont) -> float:
    """The pixel height of ``font`` at a device pixel ratio of 1 (a point is 96/72 px)."""
    if font.pixelSize() > 0:
        return font.pixelSize()
    return QFontInfo(font).pixelSize() if font.pointSizeF() <= 0 else font.pointSizeF() * 96 / 72


def css_px(size: str | None, fallback: QFont) -> float:
    """The pixel height of a pyqtgraph CSS size ("18px", "13pt"), else of ``fallback``."""
    found = re.fullmatch(r"\s*([\d.]+)\s*(px|pt)\s*", size or "")
    if not found:
        return font_px(fallback)
    value = float(found.group(1))
    return value if found.group(2) == "px" else value * 96 / 72


def shows_text(widget) -> str:
    """The text ``widget`` shows, if it is a widget that shows text."""
    if isinstance(widget, QLabel):
        return widget.text() if widget.pixmap() is None or widget.pixmap().isNull() else ""
    if isinstance(widget, QAbstractButton):
        return widget.text()
    if isinstance(widget, QGroupBox):
        return widget.title()
    if isinstance(widget, (QLineEdit, QAbstractSpinBox)):
        return "x"
    if isinstance(widget, (QComboBox, QPlainTextEdit, QTextEdit, QTableView)):
        return "x"
    return ""


def small_widgets(root, floor: int) -> list[str]:
    """Every shown widget under ``root`` whose text is smaller than ``floor`` pixels."""
    problems = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not widget.isVisible() or not shows_text(widget):
            continue
        px = font_px(widget.font())
        if px < floor - 0.01:
            problems.append(f"{type(widget).__name__} {shows_text(widget)[:30]!r}: {px:.1f} px")
        if isinstance(widget, QTableView):
            for header in (widget.horizontalHeader(), widget.verticalHeader()):
                if header.isVisible() and font_px(header.font()) < floor - 0.01:
                    problems.append(f"table header: {font_px(header.font()):.1f} px")
        if isinstance(widget, QLabel) and re.search(r"font-size|<small>", widget.text()):
            problems.append(f"label {widget.text()[:30]!r} sets its own size")
    return problems


def small_plot_text(view: pg.GraphicsView, floor: int) -> list[str]:
    """Every axis, title, legend and text item of ``view`` smaller than ``floor`` pixels."""
    problems = []
    app_font = view.font()  # what an item without a font of its own is drawn in
    for item in view.scene().items():
        if not item.isVisible():
            continue
        if isinstance(item, pg.AxisItem):
            if item.style.get("showValues", True):
                px = font_px(item.style.get("tickFont") or app_font)
                if px < floor - 0.01:
                    problems.append(f"axis {item.orientation} ticks: {px:.1f} px")
            if item.label.isVisible() and item.labelText:
                px = css_px(item.labelStyle.get("font-size"), app_font)
                if px < floor - 0.01:
                    problems.append(f"axis title {item.labelText!r}: {px:.1f} px")
        elif isinstance(item, pg.LabelItem) and item.text:
            px = css_px(item.opts.get("size"), app_font)
            if px < floor - 0.01:
                problems.append(f"label {item.text[:30]!r}: {px:.1f} px")
        elif isinstance(item, pg.TextItem) and item.toPlainText():
            px = font_px(item.textItem.font())
            if px < floor - 0.01:
                problems.append(f"text {item.toPlainText()[:30]!r}: {px:.1f} px")
    return problems


def overlapping_plot_text(view: pg.GraphicsView) -> list[str]:
    """Text items of ``view`` drawn over each other."""
    texts = [i for i in view.scene().items() if isinstance(i, pg.TextItem) and i.isVisible() and i.toPlainText()]
    for text in texts:
        text.updateTransform(force=True)
    boxes = [(t.toPlainText(), _ink_box(t)) for t in texts]
    return [f"{a!r} overlaps {b!r}" for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1 :] if box.intersects(other)]


def cut_buttons(root) -> list[str]:
    """Buttons too narrow for their text."""
    problems = []
    for button in root.findChildren(QAbstractButton):
        if button.isVisible() and button.text():
            need = button.fontMetrics().horizontalAdvance(button.text().replace("&", ""))
            if button.width() < need:
                problems.append(f"button {button.text()!r}: {button.width()} px < {need} px")
    return problems


def screens(window, qtbot):
    """Bring each view (and each page of the Overview) to the front in turn; yield its name."""
    for name in VIEWS:
        if name == "inside":
            show_inside(window, qtbot)
        else:
            window.show_view(name)
        if name == "cache":
            qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
        if name == "why":  # its captions change when the parts arrive: measure them as drawn
            qtbot.waitUntil(lambda: window.why_view.answer is not None and not window.why_view.awaiting(), timeout=30_000)
        if name == "inside":  # Inside as pages: each of them
            qtbot.waitUntil(lambda: not window.inside._paging_later.isActive(), timeout=5_000)
        turns = {"overview": (len(window.overview.pages), window.overview.show_page),
                 "inside": (len(window.inside.pages.boxes) if window.inside.paged else 0, window.inside.pages.go)}
        count, turn = turns.get(name, (0, None))
        for page in range(count) if count else [None]:
            if page is not None:
                turn(page)
            qtbot.wait(20)
            settle(window, qtbot)
            yield name if page is None else f"{name} page {page + 1}"


def screen_problems(window, floor: int) -> list[str]:
    problems = small_widgets(window, floor) + cut_buttons(window)
    problems += [p for label in window.findChildren(QLabel) if label.isVisible() for p in label_problems(label)]
    for view in window.findChildren(pg.GraphicsView):
        if view.isVisible():
            problems += small_plot_text(view, floor) + overlapping_plot_text(view)
    return problems


@pytest.mark.parametrize(("size", "projector"), CASES, ids=["1280x720-projector", "1024x768-normal"])
def test_no_text_is_smaller_than_the_floor_cut_or_overlapping(window, qtbot, size, projector):
    floor = 18 if projector else 11  # the smallest text allowed, in pixels
    window.state.set_projector(projector)
    window.resize(*size)
    window.sampling.top_k.setValue(20)
    window.sampling.top_p.setValue(0.9)
    window.sampling.sample.setChecked(True)
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    problems = []
    for name in screens(window, qtbot):
        problems += [f"{name}: {p}" for p in screen_problems(window, floor)]
    # the ? and F1 dialogs, and tooltips
    window.help.show(window.logits)
    problems += [f"help: {p}" for p in small_widgets(window.help.dialog, floor)]
    window.help.show(None)
    problems += [f"glossary: {p}" for p in small_widgets(window.help.dialog, floor)]
    window.help.dialog.close()
    if font_px(QToolTip.font()) < floor:
        problems.append(f"tooltips: {font_px(QToolTip.font()):.1f} px")
    assert problems == [], "\n".join(problems)


def test_the_floors_are_the_issues():
    """18 px on a projector, 11 px otherwise; even the smallest font a panel asks for."""
    assert th.PROJECTOR.px(-5) == 18 and th.NORMAL.px(-5) == 11
    assert font_px(th.PROJECTOR.font(-2)) >= 18 and font_px(th.NORMAL.font(-2)) >= 11

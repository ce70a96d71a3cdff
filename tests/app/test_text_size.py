"""Readable from the back of the room: no text anywhere in the window (panels, axes, legends, tables,
the ? and F1 dialogs, tooltips) is smaller than the mode's floor, 18 px in projector mode at
1280 x 720 and 11 px in normal mode at 1024 x 768; no label or button cuts its text; no two texts of
a plot overlap. Every view, every page of the Overview and every page of Inside is walked."""

from __future__ import annotations

import re

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontInfo, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QStyle,
    QStyleOptionComboBox,
    QStyleOptionGroupBox,
    QTableView,
    QTextEdit,
    QTreeView,
    QToolTip,
    QWidget,
)

from app.window import theme as th
from app.logic.views import VIEWS

from app.protocol import messages as p

from .helpers import run, run_outside_a_test, show_text_size, text_size_id
from .test_inside_view import show_inside
from .test_screens import _ink_box, label_problems, plot_problems, settle

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


# ---------------------------------------------------------------------------------------------
# No cut text: every text the Overview's panels and the Sampling, KV cache, Why and Branches views
# paint or lay out fits its box whole, at 1024 x 768 and 1280 x 720 in projector mode, 1024 x 768
# in normal mode and 1920 x 1080 at the largest step of text zoom (Ctrl+=), for the demo model (GPT-2's shape, 12 layers) and a 30-layer Llama at SmolLM2-135M's
# shape. A text with "…" or "..." in it (an elided label or number), one wider or taller than the box
# it is drawn in, one drawn outside its view, a table cell narrower than its text, a combo box's text
# cut, a panel's title run over by its ? and ⋯ buttons: each is a failure.

CUT_CASES = [((1024, 768), th.PROJECTOR), ((1280, 720), th.PROJECTOR), ((1024, 768), th.NORMAL),
             ((1920, 1080), th.TEXT_SIZES[-1])]  # (size, text size)
CUT_IDS = [text_size_id(case) for case in CUT_CASES]
CUT_VIEWS = ("overview", "sampling", "cache", "why", "branches")
ELLIPSES = ("…", "...")


def painted_texts(widget) -> list[tuple]:
    """(item, text, box, flags, font, device transform) of every text ``widget`` paints through Python
    (pyqtgraph's axes, the token axes, the chips): ``item`` is the axis that drew it (in its own
    coordinates), else None (in ``widget``'s pixels)."""
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QPainter

    drawn, current = [], [None]
    real_text, real_picture = QPainter.drawText, pg.AxisItem.drawPicture

    def recording(painter, *args):
        if len(args) == 3 and not isinstance(args[0], (int, float)):
            box = QRectF(args[0])
            drawn.append((current[0], str(args[2]), box, int(args[1]), QFont(painter.font()), painter.deviceTransform()))
        else:  # a text drawn at a point: no box to fit
            drawn.append((current[0], str(args[-1]), None, 0, QFont(painter.font()), painter.deviceTransform()))
        return real_text(painter, *args)

    def drawing(axis, *args, **kw):
        current[0] = axis
        try:
            return real_picture(axis, *args, **kw)
        finally:
            current[0] = None

    QPainter.drawText, pg.AxisItem.drawPicture = recording, drawing
    try:
        for view in [widget] if isinstance(widget, pg.GraphicsView) else []:
            for item in view.scene().items():
                if isinstance(item, pg.AxisItem):
                    item.picture = None  # drawn again, through drawText
        widget.grab()
    finally:
        QPainter.drawText, pg.AxisItem.drawPicture = real_text, real_picture
    return drawn


def painted_problems(widget) -> list[str]:
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QFontMetricsF

    problems = []
    if isinstance(widget, pg.GraphicsView):
        edge = QRectF(widget.viewport().rect()).adjusted(-1, -1, 1, 1)
    else:
        edge = QRectF(widget.rect()).adjusted(-1, -1, 1, 1)
    for item, text, box, flags, font, transform in painted_texts(widget):
        if not text.strip():
            continue
        if any(e in text for e in ELLIPSES):
            problems.append(f"elided: {text!r}")
        if box is None:
            continue
        fm = QFontMetricsF(font)
        ink = fm.boundingRect(box, flags, text)
        lines = max(1, round(ink.height() / fm.lineSpacing()))
        if flags & Qt.TextDontClip:  # drawn whole past its box (pyqtgraph's ticks): only the view's edge cuts it
            cut = ink.width() > box.width() + 1
        elif lines > 1:
            cut = ink.width() > box.width() + 1 or ink.height() > box.height() + 1
        else:  # the glyphs where Qt puts them, not the line's leading (pyqtgraph's tick boxes are 0.8 of a line)
            glyphs = fm.tightBoundingRect(text).translated(ink.left(), ink.top() + fm.ascent())
            cut = ink.width() > box.width() + 1 or not box.adjusted(-1, -1, 1, 1).contains(glyphs)
        if cut:
            problems.append(f"{text!r} needs {ink.width():.1f} x {ink.height():.0f} px, its box is {box.getRect()}, flags {flags:#x}")
        ink = QRectF(ink.x(), max(ink.y(), box.y()), ink.width(), min(ink.height(), box.height()))
        if item is not None:  # an axis's text, in the axis's coordinates
            if not item.isVisible():
                continue
            where = widget.mapFromScene(item.mapRectToScene(ink)).boundingRect()
        else:
            where = transform.mapRect(ink)
        if not edge.contains(QRectF(where)):
            problems.append(f"{text!r} drawn outside its view at {QRectF(where).getRect()}")
    return problems


def table_problems(table) -> list[str]:
    """Cells of ``table`` (shown) narrower than their text, or elided."""
    problems = []
    model = table.model()
    margin = 2 * (table.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, table) + 1)
    for row in range(model.rowCount()):
        for column in range(model.columnCount()):
            if table.isColumnHidden(column) or table.isRowHidden(row):
                continue
            index = model.index(row, column)
            text = str(index.data() or "")
            if not text:
                continue
            font = index.data(Qt.FontRole)
            fm = QFontMetrics(font if font is not None else table.font())
            box = table.visualRect(index)
            need = max(fm.horizontalAdvance(line) for line in text.split("\n")) + margin
            if any(text.endswith(e) for e in ELLIPSES):
                problems.append(f"table cell elided: {text!r}")
            if box.width() < need:
                problems.append(f"table cell {text!r}: {box.width()} px < {need} px")
    return problems


def tree_problems(tree) -> list[str]:
    """Cells of ``tree`` (shown) whose text, as its delegate paints it, is wider or taller than the
    cell's text box (Qt then elides it with "…"), or has "…" in it."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    problems = []
    model = tree.model()
    margin = 2 * (tree.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, tree) + 1)
    parents = [tree.rootIndex()]
    while parents:
        parent = parents.pop(0)
        for row in range(model.rowCount(parent)):
            for column in range(model.columnCount(parent)):
                if tree.isColumnHidden(column):
                    continue
                index = model.index(row, column, parent)
                option = QStyleOptionViewItem()
                option.font = tree.font()
                tree.itemDelegateForIndex(index).initStyleOption(option, index)
                if not option.text:
                    continue
                option.rect = tree.visualRect(index)
                box = tree.style().subElementRect(QStyle.SE_ItemViewItemText, option, tree)
                fm = QFontMetrics(option.font)
                lines = re.split("[\n\u2028]", option.text)  # a line break, or Unicode's line separator
                width = max(fm.horizontalAdvance(line) for line in lines) + margin
                height = fm.lineSpacing() * (len(lines) - 1) + fm.height()
                if any(e in option.text for e in ELLIPSES):
                    problems.append(f"tree cell elided: {option.text!r}")
                if box.width() < width or box.height() < height:
                    problems.append(f"tree cell {option.text!r} needs {width} x {height} px, its box is {box.width()} x {box.height()} px")
            index = model.index(row, 0, parent)
            if model.hasChildren(index) and tree.isExpanded(index):
                parents.append(index)
    return problems


def table_fit_problems(table) -> list[str]:
    """A table (shown) that scrolls sideways, or a column of it outside its viewport: a column the
    class cannot see without a scrollbar is as good as cut."""
    problems = []
    name = f"{type(table.parent()).__name__} table"
    bar = table.horizontalScrollBar()
    if bar.maximum() > bar.minimum():
        problems.append(f"{name} scrolls sideways")
    header, width = table.horizontalHeader(), table.viewport().width()
    for column in range(table.model().columnCount()):
        if table.isColumnHidden(column):
            continue
        left = header.sectionViewportPosition(column)
        if left < 0 or left + header.sectionSize(column) > width + 1:
            title = str(table.model().headerData(column, Qt.Horizontal) or column).replace("\n", " ")
            problems.append(f"{name} column {title!r} outside its viewport ({left} + {header.sectionSize(column)} > {width} px)")
    return problems


def overlapping_siblings(root) -> list[str]:
    """Two shown widgets placed by the same layout that overlap (the layout had less room than their
    least sizes: one is drawn over the other)."""
    problems = []
    for parent in [root, *root.findChildren(QWidget)]:
        layout = parent.layout()
        if layout is None or not parent.isVisible():
            continue
        placed = [w for w in parent.findChildren(QWidget, options=Qt.FindDirectChildrenOnly)
                  if w.isVisible() and not w.isWindow() and layout.indexOf(w) >= 0]
        nested = [w for w in parent.findChildren(QWidget, options=Qt.FindDirectChildrenOnly)
                  if w.isVisible() and not w.isWindow() and layout.indexOf(w) < 0 and _in_nested_layout(layout, w)]
        placed += nested
        for i, a in enumerate(placed):
            for b in placed[i + 1 :]:
                common = a.geometry().intersected(b.geometry())
                if common.width() > 0 and common.height() > 0:
                    problems.append(f"{type(parent).__name__}: {_widget_name(a)} and {_widget_name(b)} overlap by "
                                    f"{common.width()} x {common.height()} px")
    return problems


def _in_nested_layout(layout, widget) -> bool:
    for i in range(layout.count()):
        child = layout.itemAt(i).layout()
        if child is not None and (child.indexOf(widget) >= 0 or _in_nested_layout(child, widget)):
            return True
    return False


def _widget_name(widget) -> str:
    text = shows_text(widget)
    return f"{type(widget).__name__}{'' if not text or text == 'x' else ' ' + repr(text[:30])}"


def combo_problems(combo) -> list[str]:
    option = QStyleOptionComboBox()
    option.initFrom(combo)
    field = combo.style().subControlRect(QStyle.CC_ComboBox, option, QStyle.SC_ComboBoxEditField, combo)
    need = combo.fontMetrics().horizontalAdvance(combo.currentText())
    return [f"combo box {combo.currentText()!r}: {field.width()} px < {need} px"] if field.width() < need else []


def title_problems(box) -> list[str]:
    """A panel's title run over by the buttons in its title row (its ? and ⋯)."""
    from app.window.help_dialog import CornerButton

    option = QStyleOptionGroupBox()
    box.initStyleOption(option)
    title = box.style().subControlRect(QStyle.CC_GroupBox, option, QStyle.SC_GroupBoxLabel, box)
    need = box.fontMetrics().horizontalAdvance(box.title().replace("&", ""))
    problems = [f"title {box.title()!r}: {title.width()} px < {need} px"] if title.width() < need else []
    for button in box.findChildren(CornerButton):
        if button.isVisible() and button.parent() is box and button.geometry().intersects(title):
            problems.append(f"title {box.title()!r} runs under its {button.text()!r} button")
    return problems


def cut_text_problems(window, view: str) -> list[str]:
    """Every cut text of the view in front (and the window's bars)."""
    root = window.centralWidget()
    problems = cut_buttons(window)
    shown = [w for w in [root, *root.findChildren(QWidget)] if w.isVisible()]
    for widget in shown:
        if isinstance(widget, QLabel):
            problems += label_problems(widget)
            if widget.text().rstrip().endswith(ELLIPSES[1]):
                problems.append(f"label elided: {widget.text()!r}")
        elif isinstance(widget, pg.GraphicsView):
            problems += painted_problems(widget)
            for item in widget.scene().items():
                if isinstance(item, pg.TextItem) and item.isVisible() and item.toPlainText():
                    if any(e in item.toPlainText() for e in ELLIPSES):
                        problems.append(f"elided: {item.toPlainText()!r}")
                    item.updateTransform(force=True)
                    box = widget.mapFromScene(_ink_box(item)).boundingRect()
                    if not widget.viewport().rect().adjusted(-1, -1, 1, 1).contains(box):
                        problems.append(f"{item.toPlainText()!r} cut by the edge of its view: {box.getRect()} in {widget.viewport().rect().getRect()}")
        elif isinstance(widget, QTableView):
            problems += table_problems(widget) + table_fit_problems(widget)
        elif isinstance(widget, QTreeView):
            problems += tree_problems(widget)
        elif isinstance(widget, QComboBox):
            problems += combo_problems(widget)
        elif isinstance(widget, QGroupBox) and widget.title():
            problems += title_problems(widget)
        elif type(widget).__name__ == "TokenStrip":
            problems += painted_problems(widget)
    problems += overlapping_siblings(root)
    for panel in shown:
        if hasattr(panel, "plot_needs") and hasattr(panel, "short_title"):
            problems += plot_problems(panel)
    return [f"{view}: {p}" for p in problems]


def cut_texts_everywhere(window, qtbot, size, theme) -> list[str]:
    show_text_size(window, size, theme)
    problems = []
    for name in CUT_VIEWS:
        window.show_view(name)
        if name == "cache":
            qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
        if name == "why":
            qtbot.waitUntil(lambda: window.why_view.answer is not None and not window.why_view.awaiting(), timeout=30_000)
        pages = range(len(window.overview.pages)) if name == "overview" else [None]
        for page in pages:
            if page is not None:
                window.overview.show_page(page)
            qtbot.wait(20)
            settle(window, qtbot)
            problems += cut_text_problems(window, name if page is None else f"{name} page {page + 1}")
    return list(dict.fromkeys(problems))


def _stepped(window):
    window.sampling.top_k.setValue(20)
    window.sampling.top_p.setValue(0.9)
    window.sampling.sample.setChecked(True)
    for _ in range(3):
        run_outside_a_test(window, window.step, p.Step)
    run_outside_a_test(window, window.back, p.Back)  # a second branch for the Branches view
    ids = window.logits.bar_ids()
    chosen = window.state.result.trace.chosen if window.state.result.trace is not None else None
    other = next(int(i) for i in ids if int(i) != chosen)
    run_outside_a_test(window, lambda: window.controller.choose(other), p.Choose)
    return window


@pytest.fixture(scope="module")
def demo_window(module_window, demo_model):
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=demo_model, prompt="The cat sat on the"), p.Load)
    return _stepped(window)


@pytest.fixture(scope="module")
def smollm_window(module_window, smollm_loaded):
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=smollm_loaded, prompt="The capital of France is"), p.Load, 60_000)
    return _stepped(window)


@pytest.mark.parametrize(("size", "theme"), CUT_CASES, ids=CUT_IDS)
def test_no_text_is_cut_for_the_demo_model(demo_window, qtbot, size, theme):
    problems = cut_texts_everywhere(demo_window, qtbot, size, theme)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(("size", "theme"), CUT_CASES, ids=CUT_IDS)
def test_no_text_is_cut_for_a_30_layer_llama(smollm_window, qtbot, size, theme):
    problems = cut_texts_everywhere(smollm_window, qtbot, size, theme)
    assert problems == [], "\n".join(problems)


def test_the_kv_cache_panel_of_30_layers_fits_a_projector_page(smollm_window, qtbot):
    """30 layers make the three plots too wide for one row at 1024 x 768 projector: the panel stacks
    them in two rows and, where it is too short for them under the whole bytes sentence, says its
    grouped-heads sentence in the bytes line's tooltip, so that the two rows have their least heights (the panel's least size assumed one row: its plots overlapped by
    4 px), and its least size says what two rows need."""
    window = smollm_window
    window.commands.projector_action.setChecked(True)
    window.state.set_projector(True)
    window.resize(1024, 768)
    window.show_view("overview")
    kv = window.kv
    window.overview.show_panel(kv)
    qtbot.wait(20)
    settle(window, qtbot)
    assert not kv._one_row
    assert kv.height() >= kv.minimumSizeHint().height()
    row0 = kv.layer_view.geometry().united(kv.growth_view.geometry())
    assert row0.bottom() < kv.time_view.geometry().top()
    grouped = "Grouped heads: 9 query heads share 3 key/value heads"
    if kv.height() < kv._height(kv._bytes[0], kv.width(), one_row=False):  # too short for the whole sentence
        assert grouped in kv.bytes_label.toolTip() and grouped not in kv.bytes_label.text()
    else:
        assert grouped in kv.bytes_label.text()
    assert overlapping_siblings(kv) == []


def test_a_legends_swatch_never_ends_a_line_without_its_words(window, qtbot):
    """The candidates' legend wrapped at 1366 x 768 (a chat turn) as "■ chosen ■ can be drawn ■" over
    "removed (top-k, top-p)": a colour square at a line's end, its words on the next. In every label a
    swatch is bound to its first word by a no-break space."""
    run(qtbot, window, window.step, p.Step)
    window.show_view("overview")
    loose = []
    for label in window.findChildren(QLabel):
        plain = re.sub(r"<[^>]+>", "", label.text()).replace("&nbsp;", "\u00a0")
        loose += [f"{plain!r}" for found in re.finditer("■", plain) if plain[found.end():found.end() + 1] != "\u00a0"]
    assert loose == []

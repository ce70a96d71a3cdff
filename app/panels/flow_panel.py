"""The flow: one step as one picture, in the order the model computes (``app.logic.flow_layout`` places
the boxes; ``app.logic.flow_numbers`` gives each box the step's own numbers; ``app.logic.flow_picture``
turns them into the list of texts, bars and frames drawn, which tests read).

Painted with one QPainter pass over that list (about a hundred rects and lines of text), computing
nothing: no plot items to lay out, so a step costs the window little, and nothing at all while the
view is hidden. The texts' widths and fitted wordings are remembered per font (``text_fit.Fitter``). A click on a box
asks to open that place in a detail view (``openRequested``); the tour lights one box up and shows
its sentence in a band at the bottom (``set_tour``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.window import theme as th
from app.logic.flow_layout import FlowLayout, layout
from app.logic.flow_numbers import FlowNumbers, flow_numbers
from app.logic.flow_picture import (ARROW, BARS, BOX as BOX_ITEM, CELL, FILL, FRAME, TEXT, VECTOR, Painted, flow_picture,
                                    heads_geometry, maths_picture, tour_picture)
from app.logic.flow_texts import TITLES as TITLE_WORDINGS, flow_lines
from app.logic.text_fit import Fitter
from app.panels.flow_attention_strip import HeadMathsSource
from app.panels.flow_sampling_controls import FlowSamplingControls
from app.window.guard import guarded
from app.logic.state import AppState

TITLES = {box: wordings[0] for box, wordings in TITLE_WORDINGS.items()}  # each box's title in its longest wording
ATTENTION = th.CANDIDATE  # what a block's attention adds
MLP = "#7F7F7F"  # what a block's MLP adds
STREAM = th.DARK  # the residual stream's length
HIGHLIGHT = th.VERMILION  # the tour's stage
BOX = "#FAFAFA"
INKS = {  # flow_picture's inks: what each colour means -> the colour
    "dark": th.DARK, "grey": th.GREY, "white": "#FFFFFF", "attention": ATTENTION, "mlp": MLP, "stream": STREAM,
    "keys": th.KEYS, "chosen": th.CHOSEN, "candidate": th.CANDIDATE, "chip": th.GENERATED_CHIP, "stripe": "#F0F0F0",
    "selected": th.SELECTED, "highlight": HIGHLIGHT, "caption": "#FFF4E0",
}
ALIGN = {(right, wrap): int((Qt.AlignRight if right else Qt.AlignLeft) | Qt.AlignVCenter | (Qt.TextWordWrap if wrap else 0))
         for right in (False, True) for wrap in (False, True)}  # a text item's flags: (right, wrap) -> Qt's
TOUR_CAPTION_LINES = 3
FONT_DELTAS = (6, 5, 4, 3, 2, 1, 0, -1)  # points from the theme's base size, largest first; -1 is the floor
WIDEST = {  # a long line of each column, which a larger font must leave unclipped
    "embedding": "+ position row 1023",
    "blocks": "Block 11: |x| 00.0 → 00.0 → 00.0",
    "logits": "768 → 50,257 logits",
    "chosen": "u = 0.000 in [0.000, 0.000)",
}


@dataclass(frozen=True)
class FlowPlace:
    """Where a click on the flow leads: a view of ``app.logic.views`` and the selection to show there
    (-1: leave that selection as it is; ``newest``: select the newest position, the one the flow
    follows)."""

    view: str
    layer: int = -1
    head: int = -1
    newest: bool = False


def box_title(name: str, texts: dict[str, str] | None) -> str:
    """A box's title: the final norm's names the model's kind of norm (``texts``: ``flow_texts``)."""
    if name == "ln_final" and texts and texts.get("ln_final_title"):
        return texts["ln_final_title"]
    return TITLES[name]


class FlowPanel(QWidget):
    """The flow view's picture; draws the step ``state`` gave it (``result``: the newest may be
    current in the state before it reaches this panel, and is not painted until it has) and asks for
    a detail view on a click."""

    openRequested = Signal(object)  # FlowPlace

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.result = None  # the SessionResult this panel was given last (None: none yet)
        self.numbers: FlowNumbers | None = None
        self.lines: dict[str, tuple] = {}  # flow_lines(numbers): every line's wordings, longest first
        self.fitter: Fitter | None = None  # the texts' widths and fitted wordings in the present fonts (_fit_fonts)
        self._pictures: dict[str, tuple] = {}  # part -> (what it was made of, its items): see picture()
        self.tour_box: str | None = None  # the box the tour lights up, or None outside the tour
        self.tour_text = ""
        self._layout: FlowLayout | None = None
        self._layout_key: tuple = ()
        self._dirty = True  # the numbers wait for the view to be shown
        self.maths = HeadMathsSource(state, self)  # the selected head's maths, asked of the engine
        self.maths.changed.connect(self._on_maths_changed)
        self.sampling_controls = FlowSamplingControls(self)  # temperature and top-k, on the sampling box's first line
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.setMouseTracking(True)
        self.setToolTip("Click a box to open it in its detail view (Alt+1 or F comes back here)")
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    # ------------------------------------------------------------ state in
    def _on_state_result(self, result) -> None:
        previous, self.result = self.result, result
        if previous is None or result.n_layer != previous.n_layer:
            self._fit_fonts()  # another model: other rows
        self._dirty = True
        if self.isVisible():  # hidden, a step costs this view nothing: it reads the numbers when shown
            self.update()

    def _on_state_selection(self, _value: int) -> None:
        self._dirty = True
        self._layout = None  # another block expanded
        if self.isVisible():
            self.update()

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.pen_width = theme.line
        self._fit_fonts()
        self.update()

    def _fit_fonts(self) -> None:
        """The largest of the theme's fonts (its base size - 1 to + 3 points) with which every box
        gets all the lines it can use: large on a big screen, never below the theme's size - 1."""
        theme = self.state.theme
        n_layer = self.result.n_layer if self.result is not None else 1
        for delta in FONT_DELTAS:
            metrics = QFontMetrics(theme.font(delta, bold=True))
            lay = layout(max(1, self.width()), max(1, self.height()), n_layer, metrics.height(), 0, TOUR_CAPTION_LINES)
            wide_enough = all(metrics.horizontalAdvance(text) + 4 * lay.pad <= lay.boxes[box][2] for box, text in WIDEST.items())
            if lay.fits_all() and wide_enough:
                break
        self.font_delta = delta
        self.body_font = theme.font(delta)
        self.title_font = theme.font(delta, bold=True)
        self.line = max(QFontMetrics(self.body_font).height(), QFontMetrics(self.title_font).height())
        self._metrics = (QFontMetrics(self.body_font), QFontMetrics(self.title_font))
        self.fitter = Fitter(self._ink_width)
        self._layout = None
        self._place_controls()

    def _ink_width(self, text: str, bold: bool) -> int:
        return self._metrics[bold].boundingRect(QRect(0, 0, 1 << 20, self.line), int(Qt.AlignLeft | Qt.AlignVCenter), text).width()

    def measure(self, text: str, bold: bool = False) -> int:
        """``text``'s width in the body (or title) font, measured once per font."""
        return self.fitter.width(text, bold)

    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_fonts()

    def set_tour(self, box: str | None, text: str = "") -> None:
        """Light up ``box`` and show ``text`` under the flow (None: the tour is off)."""
        if (box is None) != (self.tour_box is None):
            self._layout = None  # the caption band comes or goes
        self.tour_box, self.tour_text = box, text
        self._place_controls()
        self.update()

    def _place_controls(self) -> None:
        lay = self.flow_layout()
        self.sampling_controls.place(lay.boxes["sampling"], self.line, lay.pad, self.body_font)

    # ------------------------------------------------------------ geometry
    def flow_layout(self) -> FlowLayout:
        """The rects at the widget's present size (tests read them)."""
        n_layer = self.result.n_layer if self.result is not None else 1
        key = (self.width(), self.height(), n_layer, self.line, self.state.layer, self.tour_box is not None)
        if self._layout is None or self._layout_key != key:
            self._layout_key = key
            self._layout = layout(self.width(), self.height(), n_layer, self.line, self.state.layer,
                                  TOUR_CAPTION_LINES if self.tour_box is not None else 0)
        return self._layout

    def place_at(self, x: int, y: int) -> FlowPlace | None:
        """Where a click at (x, y) leads, or None (between the boxes)."""
        hit = self.flow_layout().box_at(x, y)
        if hit is None:
            return None
        box, layer = hit
        n = self.current()
        last = n.n_layer - 1 if n is not None else 0
        if box == "blocks":
            return FlowPlace("inside", layer if layer >= 0 else self.state.layer, self.state.head, newest=True)
        if box == "kv":
            return FlowPlace("cache", layer if layer >= 0 else self.state.layer)
        return {
            "tokens": FlowPlace("overview", newest=True),
            "embedding": FlowPlace("inside", 0, newest=True),
            "ln_final": FlowPlace("inside", last, newest=True),
            "lm_head": FlowPlace("inside", last, newest=True),
            "logits": FlowPlace("overview"),
            "sampling": FlowPlace("sampling"),
            "chosen": FlowPlace("sampling"),
            "appended": FlowPlace("overview"),
            "maths": FlowPlace("inside", self.state.layer, self.state.head, newest=True),
        }[box]

    @guarded
    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt's name
        pos = event.position().toPoint()
        if event.button() == Qt.RightButton:  # "why?" on the chosen token: the Why view splits its logit
            if self.result is not None and (self.flow_layout().box_at(pos.x(), pos.y()) or ("",))[0] == "chosen":
                self.openRequested.emit(FlowPlace("why"))
            return
        if event.button() != Qt.LeftButton:
            return
        lay = self.flow_layout()
        hx, hy, hw, hh = lay.parts["heads"]
        if hy <= pos.y() < hy + hh and hx <= pos.x() < hx + hw and self.result is not None:
            _label, left, cell = self.heads_geometry(lay)
            if pos.x() >= left:  # a head: select it here
                self.state.set_head(min(self.result.n_head - 1, int((pos.x() - left) // cell)))
            return
        hit = lay.box_at(pos.x(), pos.y())
        if hit is not None and hit[0] in ("blocks", "kv") and hit[1] >= 0 and hit[1] != self.state.layer:
            self.state.set_layer(hit[1])  # a collapsed block: expand it here first; a click on it opens it
            return
        place = self.place_at(pos.x(), pos.y())
        if place is not None:
            self.openRequested.emit(place)

    def heads_geometry(self, lay: FlowLayout) -> tuple[str, int, float]:
        """The expanded block's heads strip as the paint draws it and a click reads it: its label,
        the x where the heads' cells start and a cell's width (``flow_picture.heads_geometry``)."""
        n_head = self.result.n_head if self.result is not None else 1
        self.current()
        return heads_geometry(lay, n_head, self.lines.get("heads"), self.fitter)

    def current(self) -> FlowNumbers | None:
        """The numbers of the step this panel was given, at the selected layer and head (None: no
        step yet); the tour reads the same."""
        if self._dirty:
            result = self.result
            self.numbers = None if result is None else flow_numbers(result, self.state.layer, self.state.head)
            self.lines = {} if self.numbers is None else flow_lines(self.numbers)
            self._dirty = False
        return self.numbers

    # ------------------------------------------------------------ what is painted
    def picture(self) -> list[Painted]:
        """Everything the next paint draws, in order (``app.logic.flow_picture``): the step's boxes
        and numbers, the head's maths table, the tour's frame and sentence. Each part is made again
        only when what it is made of changed (the step, the selection, the size, the fonts, the
        engine's answer, the tour)."""
        lay = self.flow_layout()
        n = self.current()
        n_layer = self.result.n_layer if self.result is not None else None
        key = (n, lay, self.fitter, n_layer)
        if not _same(self._pictures.get("flow", ((),))[0], key):
            self._pictures["flow"] = (key, flow_picture(n, self.lines, lay, self.fitter, n_layer))
        parts = [self._pictures["flow"][1]]
        if n is not None and "maths" in lay.parts:  # the head's maths for the newest query, once the engine's answer is this step's
            m = self.maths.maths
            m = m if m is not None and (m.step, m.layer, m.head) == (n.step, n.layer, n.head) else None
            note = self.maths.note(n.head)
            key = (m, note, lay, self.fitter)
            if not _same(self._pictures.get("maths", ((),))[0], key):
                gap = self._metrics[False].horizontalAdvance(" ") + 2
                self._pictures["maths"] = (key, maths_picture(lay.parts["maths"], m, note, self.line, self.fitter, gap, lay.pad))
            parts.append(self._pictures["maths"][1])
        parts.append(tour_picture(lay, self.tour_box, self.tour_text, self.pen_width))
        return [item for part in parts for item in part]

    # ------------------------------------------------------------ painting
    @guarded
    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing, False)
        lay = self.flow_layout()
        items = self.picture()
        if self._maths_rect(lay).contains(event.rect()) and self.numbers is not None:
            items = self._pictures["maths"][1]  # the engine's answer came: only the table changed
        else:
            p.fillRect(self.rect(), QColor("white"))
        inks = {name: QColor(color) for name, color in INKS.items()}
        lut = None
        for item in items:
            kind = item.kind
            if kind == TEXT:
                p.setFont(self.title_font if item.bold else self.body_font)
                p.setPen(inks[item.ink])
                p.drawText(_rect(item.rect), ALIGN[item.right, item.wrap], item.text)
            elif kind == FILL:
                color = inks[item.ink] if item.alpha == 255 else th.qcolor(INKS[item.ink], item.alpha)
                p.fillRect(_rect(item.rect), color)
            elif kind == BOX_ITEM:
                p.setPen(QPen(inks["grey"], 1))
                p.setBrush(QColor(BOX))
                p.drawRoundedRect(QRectF(*item.rect), 4, 4)
            elif kind == FRAME:
                p.setPen(QPen(inks[item.ink], item.pen))
                p.setBrush(Qt.NoBrush)
                if item.rounded:
                    p.drawRoundedRect(QRectF(*item.rect), 4, 4)
                else:
                    p.drawRect(_rect(item.rect))
            elif kind == ARROW:
                p.setPen(QPen(inks["dark"], 1.5))
                _arrow(p, item.values, item.pen)
            elif kind in (VECTOR, CELL):
                if lut is None:
                    lut = self.state.theme.cmap().getLookupTable(nPts=256, alpha=False)
                if kind == CELL:
                    c = lut[item.values]
                    p.fillRect(_rect(item.rect), QColor(int(c[0]), int(c[1]), int(c[2])))
                else:
                    rgb = np.ascontiguousarray(lut[item.values][None, :, :3].astype(np.uint8))
                    image = QImage(rgb.data, rgb.shape[1], 1, 3 * rgb.shape[1], QImage.Format_RGB888)
                    p.drawImage(_rect(item.rect), image)
            elif kind == BARS:
                x, y, w, h = item.rect
                weights, top = item.values
                p.drawImage(_rect(item.rect), _bars_image(weights, top, h, w))
        p.end()

    def _maths_rect(self, lay: FlowLayout) -> QRect:
        """The head maths' table and its frame (empty: none, or the tour draws over it)."""
        part = lay.parts.get("maths")
        if part is None or self.tour_box is not None:
            return QRect()
        return QRect(*part).adjusted(-3, -1, 3, 1)

    def _on_maths_changed(self) -> None:
        rect = self._maths_rect(self.flow_layout())
        if self.isVisible() and not rect.isEmpty():
            self.update(rect)
        elif self.isVisible():
            self.update()


def _same(a: tuple, b: tuple) -> bool:
    """Whether two keys of ``FlowPanel.picture`` name the same things: the same objects (a step's
    numbers are made anew when anything in them changes), equal texts and counts."""
    return len(a) == len(b) and all(x is y or (isinstance(x, (str, int)) and x == y) for x, y in zip(a, b))


def _rect(r) -> QRect | QRectF:
    """A painted item's rect as Qt takes it: whole pixels, or half pixels where it has floats."""
    return QRectF(*r) if isinstance(r[0], float) or isinstance(r[1], float) else QRect(*r)


def _rgb(hex_color: str) -> np.ndarray:
    c = QColor(hex_color)
    return np.array([c.red(), c.green(), c.blue()], dtype=np.uint8)


def _bars_image(weights: np.ndarray, top: int, height: int, width: int) -> QImage:
    """A bar chart of ``weights`` as an image ``height`` pixels high, one column per bar (at most
    ``width``: more bars share a column, which shows their largest), bar ``top`` in the chosen
    colour and a 1-pixel gap between bars when there is room for one."""
    n = len(weights)
    columns = min(n, max(1, width))
    starts = (np.arange(columns) * n) // columns
    heights = np.maximum.reduceat(np.asarray(weights, dtype=np.float32), starts)
    heights = np.maximum(1, (height * heights / max(float(heights.max()), 1e-9)).astype(np.int32))
    rows = np.arange(height)[:, None]
    filled = rows >= height - heights[None, :]  # [height, columns]
    image = np.full((height, columns, 3), 255, dtype=np.uint8)
    image[filled] = _rgb(ATTENTION)
    column = np.searchsorted(starts, top, side="right") - 1
    image[filled[:, column], column] = _rgb(th.CHOSEN)
    scale = max(1, width // columns)  # whole pixels per bar, the last of them a gap
    if scale >= 3:
        image = np.repeat(image, scale, axis=1)
        image[:, scale - 1 :: scale] = 255
    image = np.ascontiguousarray(image)
    return QImage(image.data, image.shape[1], height, 3 * image.shape[1], QImage.Format_RGB888).copy()


def _arrow(p: QPainter, points, head: int) -> None:
    """A polyline with an arrow head at its last point."""
    qpoints = [QPointF(x, y) for x, y in points]
    for a, b in zip(qpoints, qpoints[1:]):
        p.drawLine(a, b)
    (x1, y1), (x2, y2) = points[-2], points[-1]
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    tip = QPointF(x2, y2)
    left = QPointF(x2 - head * ux + head * 0.6 * uy, y2 - head * uy - head * 0.6 * ux)
    right = QPointF(x2 - head * ux - head * 0.6 * uy, y2 - head * uy + head * 0.6 * ux)
    p.save()
    p.setBrush(QColor(th.DARK))
    p.drawPolygon(QPolygonF([tip, left, right]))
    p.restore()

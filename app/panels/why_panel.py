"""Why this token? The step's logit split into what each part of the model writes straight into it.

A waterfall from the token embedding through every block's attention and MLP to the logit; a
layer × head map of the heads' parts (a click selects that head everywhere, through the app state);
for the selected head, a bar per position it read. The target is the chosen token, any candidate,
or one candidate rather than another. The engine computes the parts on request
(``controller.attribute``, answered by an ``engine.attribution_trace.Attribution``): nothing is
added to a step while this view is closed. Words and bars come from ``app.logic.why_numbers``.
"""

from __future__ import annotations

from html import escape

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QGridLayout, QHBoxLayout, QLabel, QPushButton, QStackedWidget,
                               QVBoxLayout, QWidget)

from engine.tokens import clip

from app.window import theme as th
from app.logic import why_numbers as wn
from app.window.guard import guarded
from app.logic.state import AppState
from app.panels.attention_panel import ClickableImage
from app.panels.heatmap import DIVERGING, Frame, tick_every
from app.panels.patch_panel import TITLE as PATCH_TITLE, PatchPage

TAB_WORDINGS = (  # the two pages' buttons, longest wording first: the longest pair that fits the row is shown
    ("Direct attribution: what each part writes into the logit", "Direct attribution: each part's logit", "Direct attribution"),
    (PATCH_TITLE, "What if: a second prompt", "What if"),
)

CANDIDATES = 10  # candidates offered as targets
_MAP = pg.colormap.get(DIVERGING)
PUSH, PULL = _MAP.map(1.0, mode="qcolor").name(), _MAP.map(0.0, mode="qcolor").name()  # the heads map's two ends: one
# colour means one thing in all three plots
HONEST = ("Direct attribution: what each part writes straight into this logit, not what it causes through the "
          "later layers that read it (patching measures that).")


class WhyPanel(QWidget):
    """The direct logit attribution of the current step: waterfall, heads map, and the selected head's sources."""

    attributeRequested = Signal(int, int, int, int)  # step, position, target, versus (-1: none)

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.header = QLabel("Step once: then each part of the model's share of the chosen token's logit is shown here.")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.PlainText)  # token text such as <|im_end|> is text, not a tag
        self.target_box, self.versus_box = QComboBox(), QComboBox()
        self.target_box.setToolTip("The token whose logit is split: the chosen one, or any candidate")
        self.versus_box.setToolTip("Another candidate: the split is then of the difference of the two logits, "
                                   "which removes what the two share")
        for box in (self.target_box, self.versus_box):
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            box.currentIndexChanged.connect(self._on_box_changed)
        row = QHBoxLayout()
        row.addWidget(QLabel("Why"))
        row.addWidget(self.target_box)
        row.addWidget(QLabel("rather than"))
        row.addWidget(self.versus_box)
        row.addStretch(1)
        # the waterfall
        self.fall_view = th.plot_widget()
        self.fall_plot = th.fix_plot(self.fall_view.getPlotItem())
        self._fall_height = 0.0  # the drawing area's height the bars' names were given room in
        self._fall_size = (0.0, 0.0)  # and its width and height
        self.fall_plot.getViewBox().sigResized.connect(self._on_fall_resized)
        self.fall_plot.showGrid(y=True, alpha=0.25)
        self.fall_bars = pg.BarGraphItem(x=[], y0=[], height=[], width=0.8)
        self.fall_plot.addItem(self.fall_bars)
        self.zero_line = pg.InfiniteLine(0, angle=0, pen=pg.mkPen(th.NEUTRAL, width=1))
        self.fall_plot.addItem(self.zero_line)
        self.fall_labels: list[pg.TextItem] = []
        # the heads map
        self.heads_view = th.plot_widget()
        self.heads_plot = th.fix_plot(self.heads_view.getPlotItem())
        self.heads_plot.invertY(True)
        self.heads_image = ClickableImage()
        self.heads_image.setColorMap(pg.colormap.get(DIVERGING))
        self.heads_image.clicked.connect(self._on_heads_clicked)
        self.heads_plot.addItem(self.heads_image)
        self.heads_frame = Frame()
        self.heads_frame.setPen(pg.mkPen(th.SELECTED, width=2))
        self.heads_plot.addItem(self.heads_frame)
        # the selected head's sources
        self.source_view = th.plot_widget()
        self.source_plot = th.fix_plot(self.source_view.getPlotItem())
        self.source_plot.showGrid(y=True, alpha=0.25)
        self.source_bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.source_plot.addItem(self.source_bars)
        self.fall_caption, self.heads_caption, self.source_caption = QLabel(), QLabel(), QLabel()
        for label in (self.fall_caption, self.heads_caption, self.source_caption):
            label.setWordWrap(True)
        self.heads_caption.setText("<b>Each head's part</b>: click one to select it")
        self.heads_caption.setToolTip("Rows: layers, columns: heads; yellow pushes, blue pulls. The head that writes the most "
                                      "is selected first; a click selects another everywhere (the attention panel too).")
        self.honest = QLabel(HONEST)
        self.honest.setWordWrap(True)
        grid = QGridLayout()
        grid.addWidget(self.fall_caption, 0, 0)
        grid.addWidget(self.heads_caption, 0, 1)
        grid.addWidget(self.fall_view, 1, 0)
        grid.addWidget(self.heads_view, 1, 1)
        grid.addWidget(self.source_caption, 2, 0, 1, 2)
        grid.addWidget(self.source_view, 3, 0, 1, 2)
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(1, 1)
        grid.setRowStretch(1, 3)
        grid.setRowStretch(3, 2)
        # two pages: what each part writes into the logit, and what a second prompt changes (patching)
        self.patch = PatchPage(state, self._patch_target)
        first = QWidget()
        inner = QVBoxLayout(first)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(self.header)
        inner.addLayout(grid, 1)
        inner.addWidget(self.honest)
        self.pages = QStackedWidget()
        self.pages.addWidget(first)
        self.pages.addWidget(self.patch)
        self.page_buttons = QButtonGroup(self)
        tabs = QHBoxLayout()
        self._tabs_row = tabs
        for index, title in enumerate(w[0] for w in TAB_WORDINGS):
            button = QPushButton(title)
            button.setCheckable(True)
            self.page_buttons.addButton(button, index)
            tabs.addWidget(button)
        tabs.addStretch(1)
        self.page_buttons.button(0).setChecked(True)
        self.page_buttons.idClicked.connect(self.show_page)
        layout = QVBoxLayout(self)
        layout.addLayout(tabs)
        layout.addLayout(row)
        layout.addWidget(self.pages, 1)
        self.answer = None  # the AttributionResult shown
        self._asked: tuple[int, int, int, int] | None = None
        self._step_boxes: tuple[int, int] | None = None  # (step, position) the boxes were filled for
        self._pick_top_head = True  # until the first answer for a model is drawn, or a head is clicked here
        self._model = None
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        return []  # drawn when the engine answers, not in a step's turns

    # ------------------------------------------------------------ asking
    def wanted(self) -> tuple[int, int, int, int] | None:
        """(step, position, target, versus) this view wants for the current step, or None before one."""
        result = self.state.result
        if result is None or result.trace is None:
            return None
        trace = result.trace
        target = self.target_box.currentData()
        versus = self.versus_box.currentData()
        return (trace.step, trace.record.end - 1, trace.chosen if target is None else int(target),
                -1 if versus is None else int(versus))

    def wants(self, answer) -> bool:
        a = answer.attribution
        return self._asked is not None and (a.step, a.position, a.target, a.versus) == self._asked

    def awaiting(self) -> bool:
        """An answer this view asked for (the parts, or a patching map) is on its way."""
        shown = None if self.answer is None else self.answer.attribution
        parts = self._asked is not None and (shown is None or (shown.step, shown.position, shown.target, shown.versus) != self._asked)
        return parts or self.patch.awaiting()

    def show_page(self, index: int) -> None:
        """Page 0: direct attribution; 1: what if, a second prompt (activation patching)."""
        self.page_buttons.button(index).setChecked(True)
        self.pages.setCurrentIndex(index)

    def _patch_target(self) -> tuple[int, int, int] | None:
        """(step, target, versus) of the step on screen, as the boxes chose them (None before a step)."""
        wanted = self.wanted()
        return None if wanted is None else (wanted[0], wanted[2], wanted[3])

    def refresh(self) -> None:
        """Ask the engine for the parts this view wants, if it is on screen and has not asked yet."""
        wanted = self.wanted()
        if wanted is None or not self.isVisible() or wanted == self._asked:
            return
        self._asked = wanted
        self.header.setText("Working out what each part of the model writes into this step's logit…")
        self.attributeRequested.emit(*wanted)

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        QTimer.singleShot(0, self.refresh)

    def _on_state_result(self, result) -> None:
        if result.info is not self._model:
            self._model, self._pick_top_head = result.info, True
        if result.trace is None:
            self._asked, self.answer, self._step_boxes = None, None, None
            self._fill_boxes(None)
            self.header.setText("Step once: then each part of the model's share of the chosen token's logit is shown here.")
            for bars in (self.fall_bars, self.source_bars):
                bars.setOpts(x=[], height=[])
            self.heads_image.clear()
            return
        here = (result.trace.step, result.trace.record.end - 1)
        if here != self._step_boxes:  # another step: its own candidates, the chosen token first
            self._step_boxes = here
            self._fill_boxes(result.trace)
        self.refresh()
        self.patch.refresh_compare()  # a pair steps with the first prompt

    def _fill_boxes(self, trace) -> None:
        for box in (self.target_box, self.versus_box):
            box.blockSignals(True)
            box.clear()
        self.versus_box.addItem("— (the logit alone)", None)
        if trace is not None:
            ids = [int(i) for i in trace.candidate_ids[:CANDIDATES]]
            pieces = dict(zip((int(i) for i in trace.candidate_ids), trace.candidate_pieces))
            pieces.setdefault(trace.chosen, trace.chosen_piece)
            order = [trace.chosen] + [i for i in ids if i != trace.chosen]
            for i in order:
                mark = " (chosen)" if i == trace.chosen else ""
                self.target_box.addItem(f"“{clip(pieces[i], 16)}”{mark}", i)
                self.versus_box.addItem(f"“{clip(pieces[i], 16)}”{mark}", i)
        for box in (self.target_box, self.versus_box):
            box.setCurrentIndex(0)
            box.blockSignals(False)

    def choose(self, target: int, versus: int = -1) -> None:
        """Split ``target``'s logit (minus ``versus``'s: -1 none), two of this step's candidates (one
        beyond the ten the boxes offer is added to them)."""
        trace = None if self.state.result is None else self.state.result.trace
        for box, token in ((self.target_box, target), (self.versus_box, versus)):
            if token >= 0 and box.findData(int(token)) < 0 and trace is not None and int(token) in trace.candidate_ids:
                piece = trace.candidate_pieces[int(np.flatnonzero(trace.candidate_ids == int(token))[0])]
                box.blockSignals(True)
                box.addItem(f"“{clip(piece, 16)}”", int(token))
                box.blockSignals(False)
            index = 0 if token < 0 else box.findData(int(token))
            if index >= 0:
                box.blockSignals(True)  # one request for the pair, not one for each box
                box.setCurrentIndex(index)
                box.blockSignals(False)
        self.refresh()
        self.patch.refresh_compare()

    def _on_box_changed(self, _index: int) -> None:
        self.refresh()
        self.patch.refresh_compare()  # the pair's split is of the target chosen here

    def _on_heads_clicked(self, x: float, y: float) -> None:
        if self.answer is None:
            return
        L, H = self.answer.attribution.heads.shape
        layer, head = int(y), int(x)
        if 0 <= layer < L and 0 <= head < H:
            self._pick_top_head = False
            self.state.set_layer(layer)
            self.state.set_head(head)

    def _on_state_selection(self, _value: int) -> None:
        if self.answer is not None:
            self._draw_head()

    # ------------------------------------------------------------ drawing
    def show_attribution(self, answer) -> None:
        """Draw ``answer`` (an AttributionResult this view asked for)."""
        self.answer = answer
        a = answer.attribution
        self.header.setText(wn.summary(a, answer.target_piece, answer.versus_piece))
        self._draw_waterfall()
        show = np.asarray(a.heads, np.float32)
        scale = float(np.abs(show).max()) or 1.0
        self.heads_image.setImage(show, autoLevels=False, levels=(-scale, scale))
        L, H = show.shape
        self.heads_image.setRect(0, 0, H, L)
        self.heads_plot.setRange(xRange=(0, H), yRange=(0, L), padding=0)
        theme = self.state.theme
        every_row = tick_every(L, self.heads_view.height() - 3 * theme.text_px(), int(theme.text_px(-1) * 1.4))
        every_column = tick_every(H, self.heads_view.width() - 4 * theme.text_px(), theme.text_px(-1) * 2)
        self.heads_plot.getAxis("left").setTicks([[(i + 0.5, str(i)) for i in range(0, L, every_row)]])
        self.heads_plot.getAxis("bottom").setTicks([[(h + 0.5, str(h)) for h in range(0, H, every_column)]])
        th.style_plot(self.heads_plot, theme, left="layer", bottom="head")
        half = theme.text_px(-1) // 2 + 1  # the first layer's number is centred on its row: half a line above the map
        self.heads_plot.layout.setContentsMargins(1, half, 1, 7)
        if self._pick_top_head:  # the first answer for this model: the head that writes the most is selected
            self._pick_top_head = False
            layer, head, _ = wn.top_heads(a, 1)[0]
            self.state.set_layer(layer)
            self.state.set_head(head)
        self._draw_head()

    def _draw_waterfall(self) -> None:
        a = self.answer.attribution
        bars = wn.waterfall(a)
        n = len(bars)
        x = np.arange(n + 1, dtype=float)
        y0 = np.array([b.start for b in bars] + [0.0])
        height = np.array([b.value for b in bars] + [a.total])
        brushes = [PUSH if b.value >= 0 else PULL for b in bars] + [th.NEUTRAL]
        self.fall_bars.setOpts(x=x, y0=y0, height=height, width=0.8, brushes=brushes, pen=pg.mkPen(th.NEUTRAL, width=1))
        theme = self.state.theme
        for item in self.fall_labels:
            self.fall_plot.removeItem(item)
        pushes, pulls = wn.largest(a, 3)
        self.fall_labels = []
        named = pushes + pulls  # the largest named on the plot too (placed once the range is known)
        shorts = [b.short for b in bars] + ["logit"]
        every = tick_every(n + 1, self.fall_view.width(), theme.text_px(-1) * 3)
        ticks = [(i, s) for i, s in enumerate(shorts) if (i % every == 0 and n - i >= every) or i == n]  # none run into "logit"
        self.fall_plot.getAxis("bottom").setTicks([ticks])
        low = min(0.0, float(np.min(np.minimum(y0, y0 + height))))
        high = max(0.0, float(np.max(np.maximum(y0, y0 + height))))
        # room for the names above and below the largest bars: a line of the plot's height at the least
        line = QFontMetrics(theme.font(-1, bold=True)).height() + 9  # a name (a TextItem: its line and margins)
        self._fall_height = self.fall_plot.getViewBox().height()
        share = min(0.3, line / max(1.0, self._fall_height or self.fall_view.height() * 0.7))
        pad = (high - low or 1.0) * max(0.22, share / (1 - 2 * share))
        # room at the sides for half the widest name, centred on a bar at the end
        bold = QFontMetrics(theme.font(-1, bold=True))
        half = max((bold.horizontalAdvance(wn.part_label(b.key)[1]) for b in named), default=0) / 2 + 4
        wide = self.fall_plot.getViewBox().width() or self.fall_view.width() * 0.8
        edge = max(0.6, half * (n + 1) / (wide - 2 * half)) if wide > 2 * half else 0.6
        self._fall_size = (self.fall_plot.getViewBox().width(), self._fall_height)
        self.fall_plot.setRange(xRange=(-edge, n + edge), yRange=(low - pad, high + pad), padding=0)
        self._name_bars(bars, named, (-edge, n + edge), (low - pad, high + pad), bold)
        th.style_plot(self.fall_plot, theme, left="logit")  # the ticks name the parts, in the order the model adds them
        self.fall_plot.getAxis("bottom").setHeight(theme.text_px(-1) + 10)
        self.fall_caption.setText(
            f"<b>Embedding → every block → logit</b> (A attention, M MLP; yellow pushes, blue pulls; dark: the sum "
            f"{a.total:.2f}, the model's logit {a.logit:.2f})")
        self.fall_caption.setToolTip(wn.scale_sentence(a))
        self.honest.setToolTip(wn.scale_sentence(a))

    def _name_bars(self, bars, named, x_range, y_range, metrics: QFontMetrics) -> None:
        """Name the ``named`` bars over (a push) or under (a pull) their ends, the largest first;
        a name that would run into one placed already, or into a bar, moves to end at its bar's right
        edge or start at its left, then a line further out, and is left out (the sentence above names
        it) where none of that is clear either or it would leave the plot."""
        theme = self.state.theme
        vb = self.fall_plot.getViewBox()
        W = vb.width() or self.fall_view.width() * 0.8
        H = self._fall_height or self.fall_view.height() * 0.7
        (x0, x1), (y0, y1) = x_range, y_range

        def px(x: float, y: float) -> tuple[float, float]:
            return (x - x0) * W / (x1 - x0), (y1 - y) * H / (y1 - y0)

        index = {b.key: i for i, b in enumerate(bars)}
        h = metrics.height() + 8  # a TextItem's line and its margins
        ends = [(b.start, b.end) for b in bars] + [(0.0, bars[-1].end if bars else 0.0)]  # and the sum's bar
        taken = []  # every bar, in pixels, a little inside its edges: a name may touch its own bar's end
        for i, (start, end) in enumerate(ends):
            (left, top), (right, bottom) = px(i - 0.4, max(start, end)), px(i + 0.4, min(start, end))
            taken.append(QRectF(left, top, right - left, bottom - top).adjusted(0.5, 0.5, -0.5, -0.5))
        placed: list[QRectF] = []
        for b in sorted(named, key=lambda b: -abs(b.value)):
            text = wn.part_label(b.key)[1]
            w = metrics.horizontalAdvance(text) + 10
            up = b.value > 0
            cx, cy = px(index[b.key], max(b.start, b.end) if up else min(b.start, b.end))
            half = px(index[b.key] + 0.4, 0)[0] - cx  # half a bar's width
            found = None
            for k in range(2):  # by its bar, or a line further out: further, it would read as another bar's
                top = cy - h * (k + 1) if up else cy + h * k
                # centred on its bar, else ending at its right edge, else starting at its left edge
                for align, left in ((0.5, cx - w / 2), (1.0, cx + half - w), (0.0, cx - half)):
                    box = QRectF(left, top, w, h)
                    inside = box.top() >= 0 and box.bottom() <= H and (align == 0.5 or (box.left() >= 0 and box.right() <= W))
                    if inside and not any(box.intersects(r) for r in placed + taken):
                        found = box, align
                        break
                if found:
                    break
            if found is None:
                continue
            box, align = found
            placed.append(box)
            label = pg.TextItem(text, color=theme.text, anchor=(align, 1.0 if up else 0.0))
            label.setFont(theme.font(-1, bold=True))
            label.setPos(index[b.key] + 0.8 * (align - 0.5), y1 - (box.bottom() if up else box.top()) * (y1 - y0) / H)
            self.fall_plot.addItem(label)
            self.fall_labels.append(label)

    def _draw_head(self) -> None:
        a, pieces = self.answer.attribution, self.answer.source_pieces
        L, H = a.heads.shape
        layer, head = min(self.state.layer, L - 1), min(self.state.head, H - 1)
        self.heads_frame.setRect(QRectF(head, layer, 1, 1))
        values = wn.source_bars(a, layer, head)
        T = len(values)
        brushes = [PUSH if v >= 0 else PULL for v in values]
        self.source_bars.setOpts(x=np.arange(T), height=values, width=0.8, brushes=brushes, pen=pg.mkPen(th.NEUTRAL, width=1))
        theme = self.state.theme
        ticks, x_range = source_ticks([pieces[j] if j < len(pieces) else str(j) for j in range(T)],
                                      self.source_plot.getViewBox().width() or self.source_view.width() * 0.9,
                                      QFontMetrics(theme.font(-1)).horizontalAdvance)
        self.source_plot.getAxis("bottom").setTicks([ticks])
        low, high = min(0.0, float(values.min(initial=0))), max(0.0, float(values.max(initial=0)))
        pad = 0.08 * (high - low or 1.0)
        self.source_plot.setRange(xRange=x_range, yRange=(low - pad, high + pad), padding=0)
        th.style_plot(self.source_plot, theme, left="logit")  # the ticks are the positions' tokens
        self.source_plot.getAxis("bottom").setHeight(theme.text_px(-1) + 10)
        self.source_caption.setText("<b>Where the selected head took its part from</b>: "
                                    + escape(wn.head_sentence(a, layer, head, pieces), quote=False))  # <|im_start|> is a token
        self.source_caption.setToolTip("Its attention weight on each position × that position's value × W_O, read out "
                                       "through the final norm and the LM head like every part: the bars add up to the head's part.")

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_tabs()

    @guarded
    def _on_fall_resized(self, box) -> None:
        if self.answer is not None and max(abs(box.width() - self._fall_size[0]), abs(box.height() - self._fall_size[1])) > 1:
            self._draw_waterfall()  # the names' room above and below the bars is counted in pixels

    def _fit_tabs(self) -> None:
        """The pages' buttons in the longest wordings whose buttons fit the row side by side (on a
        1024 x 768 projector the first was cut)."""
        buttons = [self.page_buttons.button(i) for i in range(len(TAB_WORDINGS))]
        fm = buttons[0].fontMetrics()
        pads = [b.sizeHint().width() - fm.horizontalAdvance(b.text()) for b in buttons]
        margins = self.layout().contentsMargins()
        room = self.contentsRect().width() - margins.left() - margins.right() - self._tabs_row.spacing() * len(buttons)
        for level in range(max(len(w) for w in TAB_WORDINGS)):
            texts = [w[min(level, len(w) - 1)] for w in TAB_WORDINGS]
            if sum(fm.horizontalAdvance(t) + pad for t, pad in zip(texts, pads)) <= room:
                break
        for button, text in zip(buttons, texts):
            if button.text() != text:
                button.setText(text)
                button.setToolTip(TAB_WORDINGS[buttons.index(button)][0])

    def _on_state_theme(self, theme: th.Theme) -> None:
        lines = theme.text_px()
        self.fall_view.setMinimumHeight(7 * lines)  # the bars keep room to read whatever the captions take
        self.heads_view.setMinimumHeight(7 * lines)
        self.source_view.setMinimumHeight(4 * lines)
        self.setFont(theme.font())
        self.header.setFont(theme.font(1, bold=True))
        self._fit_tabs()
        for view in (self.fall_view, self.heads_view, self.source_view):
            th.style_plot(view.getPlotItem(), theme)
        if self.answer is not None:
            self.show_attribution(self.answer)


def source_ticks(pieces: list[str], width: float, measure, gap: int = 8) -> tuple[list[tuple[int, str]], tuple[float, float]]:
    """The sources axis: every n-th position named by its whole token (n the least that keeps the
    names ``gap`` px apart in ``width`` px), the last position always, and the x range with room
    at both ends for half the first and last names (``measure``: a text's width in px)."""
    T = len(pieces)
    if not T:
        return [], (-0.6, 0.6)
    widths = [measure(piece) for piece in pieces]
    for every in range(1, T + 1):
        shown = [j for j in range(T) if j % every == 0 and (T - 1 - j >= every or j == T - 1)]
        if shown[-1] != T - 1:
            shown.append(T - 1)
        span = T + 0.2 + (widths[shown[0]] + widths[-1]) / 2 / max(1.0, width / (T + 0.2))  # bars and the ends' room, in bars
        per_bar = width / span
        if all((b - a) * per_bar >= (widths[a] + widths[b]) / 2 + gap for a, b in zip(shown, shown[1:])):
            break
    left = max(0.6, widths[shown[0]] / 2 / per_bar + 0.1)
    right = max(0.6, widths[-1] / 2 / per_bar + 0.1)
    return [(j, pieces[j]) for j in shown], (-left, T - 1 + right)

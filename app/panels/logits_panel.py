"""Panel 4, logits: the top candidates as horizontal bars, raw logits beside final probabilities.

Two plots, each in its own view, share one token axis: on the left the raw logit the model gave
each candidate, on the right the probability it has after the sampling settings. Candidates that top-k or top-p removed are
grey, the chosen token is orange, and clicking any bar chooses that token instead (a branch).
The bar items are built once; a step only calls ``setOpts``. The panel asks room for at most
``ROWS_ASKED`` rows: a longer list ("Show top" 64 on a projector) scrolls, its text at its size,
so the window never grows past its screen.
"""

from __future__ import annotations

from html import escape
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QApplication, QGroupBox, QHBoxLayout, QLabel, QPushButton, QScrollBar, QSpinBox, QVBoxLayout,
                               QWidget)

from engine.tokens import clip
from engine.trace import N_CANDIDATES

from app.window import theme as th
from app.logic.state import AppState
from app.panels.empty_note import EmptyNote
from app.panels.steady_label import SteadyLabel
from app.window.guard import guarded
from app.logic.wording import percent

PROB_SCALES = (2, 5, 10, 20, 40, 60, 80, 100, 130)  # % : the probability axis's possible widths
ROWS_ASKED = 10  # rows the panel needs room for (the default "Show top"): more scroll
LABEL_CHARS = 10  # a candidate's token text on the axis, cut with "…" beyond: the axis never resizes


class _Bars(pg.BarGraphItem):
    """Horizontal bars (one per row, row 0 at the top) that report the row clicked."""

    rowClicked = Signal(int)
    rowAsked = Signal(int)  # a right-click: why that row's token?

    @guarded
    def mouseClickEvent(self, ev) -> None:
        if ev.button() in (Qt.LeftButton, Qt.RightButton):
            (self.rowClicked if ev.button() == Qt.LeftButton else self.rowAsked).emit(int(round(ev.pos().y())))
            ev.accept()


class LogitsPanel(QGroupBox):
    """The top N next-token candidates: raw logits and sampling probabilities; click to choose."""

    tokenChosen = Signal(int)
    whyRequested = Signal(int)  # a token id: open the Why view with its logit as the target

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("4 · Candidates: the logits of the next token", parent)
        self.short_title = "4 Candidates"
        self.state = state
        self._ids = np.zeros(0, np.int64)
        self._brushes = (pg.mkBrush(th.CHOSEN), pg.mkBrush(th.CANDIDATE), pg.mkBrush(th.REMOVED))
        self.n_spin = QSpinBox()
        self.n_spin.setRange(1, N_CANDIDATES)
        self.n_spin.setValue(state.top_n)
        self.n_spin.valueChanged.connect(state.set_top_n)
        self.summary = SteadyLabel("Step once to see the candidates.")
        foot = QHBoxLayout()  # under the plots: the summary above them has the whole width (one line)
        self.legend = QLabel(
            f"<span style='color:{th.CHOSEN}'>■</span>&nbsp;chosen &nbsp; "  # a swatch bound to its words: never a line's end
            f"<span style='color:{th.CANDIDATE}'>■</span>&nbsp;can be drawn &nbsp; "
            f"<span style='color:{th.REMOVED}'>■</span>&nbsp;removed (top-k, top-p)"
        )
        foot.addWidget(self.legend, 1)
        foot.addWidget(QLabel("Show top"))
        foot.addWidget(self.n_spin)
        self.why_button = QPushButton("why?")
        self.why_button.setToolTip("Why this token? The Why view: what each block and head of the model wrote into the "
                                   "chosen token's logit (right-click a bar: why that candidate)")
        self.why_button.setEnabled(False)
        self.why_button.clicked.connect(self._on_why_clicked)
        foot.addWidget(self.why_button)
        self.legend.setWordWrap(True)  # projector fonts: wrap rather than widen the window
        self.legend.setToolTip("Click a bar to choose that token instead")

        # one view per plot: the window paints one view per event-loop turn
        self.logit_view, self.prob_view = th.plot_widget(), th.plot_widget()
        self.logit_plot: pg.PlotItem = self.logit_view.getPlotItem()
        self.prob_plot: pg.PlotItem = self.prob_view.getPlotItem()
        plots = QHBoxLayout()
        plots.setSpacing(0)
        plots.addWidget(self.logit_view, 5)
        plots.addWidget(self.prob_view, 4)
        self.scroll = QScrollBar(Qt.Vertical)  # through a list longer than the rows that fit
        self.scroll.setToolTip("More candidates: scroll (or turn the mouse wheel over the bars)")
        self.scroll.hide()
        self.scroll.valueChanged.connect(self._on_scroll_value_changed)
        plots.addWidget(self.scroll)
        for view in (self.logit_view, self.prob_view):
            view.setToolTip("Click a bar to choose that token instead (a branch)")
            view.installEventFilter(self)  # the mouse wheel scrolls the list
        for plot in (self.logit_plot, self.prob_plot):
            th.fix_plot(plot).invertY(True)
            plot.showGrid(x=True, alpha=0.25)
        self.prob_plot.setYLink(self.logit_plot)
        self.prob_plot.getAxis("left").setStyle(showValues=False)
        self.logit_bars = _Bars(x0=[], y=[], height=0.72, width=[])
        self.prob_bars = _Bars(x0=[], y=[], height=0.72, width=[])
        self.logit_plot.addItem(self.logit_bars)
        self.prob_plot.addItem(self.prob_bars)
        self.logit_bars.rowClicked.connect(self._on_bars_row_clicked)
        self.prob_bars.rowClicked.connect(self._on_bars_row_clicked)
        self.logit_bars.rowAsked.connect(self._on_bars_row_asked)
        self.prob_bars.rowAsked.connect(self._on_bars_row_asked)
        self.labels: list[pg.TextItem] = []  # each row's "12.3%", made when a draw first needs that many (``_labels_for``)

        self.empty_notes = [EmptyNote(self.logit_view), EmptyNote(self.prob_view, "")]
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)  # ten rows of candidates fit a 1280 x 720 projector
        layout.setSpacing(4)
        layout.addWidget(self.summary)
        layout.addLayout(plots, 1)
        layout.addLayout(foot)

        # another width: other room for the labels right of the bars
        self.prob_plot.getViewBox().sigResized.connect(self._on_prob_box_resized)
        state.subscribe(self._on_state_result)
        state.topNChanged.connect(self._on_state_top_n)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)


    def plot_views(self) -> list[pg.GraphicsView]:
        """The plot views the window paints, one per event-loop turn after a step."""
        return [self.logit_view, self.prob_view]

    def rows_shown(self) -> int:
        """How many candidates' rows are in view: every one asked for when they fit at the height of
        their labels, else as many as fit (the scroll bar goes through the rest)."""
        n = len(self._ids)
        row = self.state.theme.text_px(-2)
        return min(n, max(1, int(self.prob_plot.getViewBox().height() // row)))

    def bar_ids(self) -> np.ndarray:
        """int64 [N]: the token id of each bar, top bar first."""
        return self._ids.copy()

    # -------------------------------------------------------------- state
    def _on_state_result(self, _result) -> None:
        self._draw()

    def _on_scroll_value_changed(self, _first: int) -> None:
        self._place_rows()

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Wheel and self.scroll.isVisible():
            QApplication.sendEvent(self.scroll, event)
            return True
        return False

    def _on_prob_box_resized(self, _box) -> None:
        if self.state.result is not None:
            self._draw()

    def _on_state_top_n(self, n: int) -> None:
        if self.n_spin.value() != n:
            self.n_spin.setValue(n)
        self._fit_rows()
        self._draw()

    def _on_state_theme(self, theme: th.Theme) -> None:
        th.style_plot(self.logit_plot, theme, bottom="logit (from lowest)")
        th.style_plot(self.prob_plot, theme, bottom="sampling p (%)")  # short: fits a projector's font
        th.fix_axis_width(self.logit_plot, theme, LABEL_CHARS + 2)
        th.fix_axis_width(self.prob_plot, theme, 0)
        for label in self.labels:  # one size smaller than other plots' text: ten rows fit a 720-pixel projector
            label.setFont(theme.font(-2))
        for plot in (self.logit_plot, self.prob_plot):
            plot.getAxis("left").setTickFont(theme.font(-2))
        self.summary.setFont(theme.font(0))
        self._fit_rows()
        self._draw()

    def _fit_rows(self) -> None:
        """Room for every candidate's row at the height of its label, and for the axes."""
        theme = self.state.theme
        px = theme.text_px()
        rows = min(self.state.top_n, ROWS_ASKED) * (theme.text_px(-2) + 1)  # each candidate's row a pixel taller than its label
        self._needs = [
            (self.logit_plot, th.need_area(self.logit_view, self.logit_plot, 4 * px, rows)),
            (self.prob_plot, th.need_area(self.prob_view, self.prob_plot, 5 * px, rows)),
        ]

    def plot_needs(self) -> list:
        """(plot, (width, height)): the drawing area each plot needs to be read."""
        return self._needs

    def _on_bars_row_clicked(self, row: int) -> None:
        if 0 <= row < len(self._ids):
            self.tokenChosen.emit(int(self._ids[row]))

    def _on_bars_row_asked(self, row: int) -> None:
        if 0 <= row < len(self._ids):
            self.whyRequested.emit(int(self._ids[row]))

    def _on_why_clicked(self) -> None:
        result = self.state.result
        if result is not None and result.trace is not None:
            self.whyRequested.emit(int(result.trace.chosen))

    # ------------------------------------------------------------ drawing
    def _draw(self) -> None:
        result = self.state.result
        trace = None if result is None else result.trace
        for note in self.empty_notes:
            note.setVisible(trace is None)
        self.why_button.setEnabled(trace is not None)
        if trace is None:
            self._ids = np.zeros(0, np.int64)
            for bars in (self.logit_bars, self.prob_bars):
                bars.setOpts(x0=[], y=[], width=[], brushes=[])
            for label in self.labels:
                label.setVisible(False)
            self.scroll.hide()
            self.summary.setText("Step once (Space) to see the candidates for the next token.")
            return
        n = min(self.state.top_n, len(trace.candidate_ids))
        ids = trace.candidate_ids[:n]
        self._ids = ids
        dist = trace.distribution
        logits = trace.record.logits[ids]
        probs = dist.probs[ids] * 100
        kept = dist.kept[ids]
        rows = np.arange(n)
        chosen, can, removed = self._brushes
        brushes = [chosen if t == trace.chosen else (can if k else removed) for t, k in zip(ids.tolist(), kept.tolist())]
        # bars from just below the lowest logit shown, not from 0: adding one number to every logit
        # changes nothing, so a bar twice as long as another must not look twice as likely
        lo, hi = float(logits.min()), float(logits.max())
        span = max(hi - lo, 0.5)
        base, end = math.floor(lo - 0.15 * span), math.ceil(hi + 0.05 * span)
        self.logit_bars.setOpts(x0=np.full(n, base), y=rows, width=logits - base, brushes=brushes, pen=None)
        self.prob_bars.setOpts(x0=np.zeros(n), y=rows, width=probs, brushes=brushes, pen=None)
        self.logit_plot.getAxis("left").setTicks([[(i, f"{clip(trace.candidate_pieces[i], LABEL_CHARS)}  ") for i in range(n)]])
        top = float(probs.max()) if n else 1.0
        # a few fixed scales: the axis (and every label on it) is redrawn only when the scale changes;
        # the scale leaves room right of the longest bar for its label ("100.0%") at this width
        width = max(self.prob_plot.getViewBox().width(), 1.0)
        label = QFontMetrics(self.state.theme.font(-2)).horizontalAdvance("100.0%") + 12
        room = top * width / max(width - label, width * 0.2)
        self.prob_plot.setXRange(0, next((s for s in PROB_SCALES if s >= room), PROB_SCALES[-1]), padding=0)
        # whole numbers: the axis (and its labels) repaints only when they change
        self.logit_plot.setXRange(base, end, padding=0)
        for i, label in enumerate(self._labels_for(n)):
            if i < n:
                label.setText(f"{probs[i]:.1f}%" if kept[i] else "removed", color=th.DARK if kept[i] else "#7A7A7A")
                label.setPos(float(probs[i]), i)
        self._place_rows()
        outside = ""
        if trace.chosen not in set(ids.tolist()):
            outside = f" It is outside the top {n}."
        by = {"user": "chosen by you", "greedy": "greedy", "sampled": "sampled"}[trace.record.chosen_by]
        self.summary.setText(  # two lines on a 1280 x 720 projector: its lines are taken from the plots' height
            f"<b>“{escape(trace.chosen_piece, quote=False)}”</b>: sampling p <b>{percent(trace.sampling_prob)}</b>, "
            f"model p {percent(trace.model_prob)}, rank {trace.chosen_rank:,}"
        )  # the entropies: in its tooltip, the Sampling view and the ? text
        self.summary.setToolTip(
            f"“{trace.chosen_piece}”, {by}. Sampling probability: after the penalty, temperature, top-k and top-p, "
            f"what the draw used. Model probability: the softmax of the raw logits. Sampling entropy "
            f"{trace.sampling_entropy_bits:.2f} bits, at most {trace.sampling_entropy_ceiling_bits:.2f} (log2 of the "
            f"{trace.tokens_left:,} token{'' if trace.tokens_left == 1 else 's'} left); model entropy {trace.model_entropy_bits:.2f} bits, at most "
            f"{trace.model_entropy_ceiling_bits:.1f} (log2 of the vocabulary).{outside}"
        )

    def _labels_for(self, n: int) -> list[pg.TextItem]:
        """The rows' labels, at least ``n`` (the candidates asked for): most sessions ask for ten of the
        64, and 64 labels made up front were half of building this panel."""
        while len(self.labels) < n:
            label = pg.TextItem(anchor=(0, 0.5))
            label.setFont(self.state.theme.font(-2))
            label.setVisible(False)
            self.prob_plot.addItem(label)
            self.labels.append(label)
        return self.labels

    def _place_rows(self) -> None:
        """The rows in view: from the scroll bar's value, as many as ``rows_shown``."""
        n, shown = len(self._ids), self.rows_shown()
        self.scroll.blockSignals(True)
        self.scroll.setRange(0, max(0, n - shown))
        self.scroll.setPageStep(max(1, shown))
        self.scroll.blockSignals(False)
        self.scroll.setVisible(shown < n)
        first = self.scroll.value()
        self.logit_plot.setYRange(first - 0.6, first + max(shown, 1) - 0.4, padding=0)
        for i, label in enumerate(self.labels):  # hidden labels cost nothing to paint; empty ones do
            label.setVisible(first <= i < min(n, first + shown))

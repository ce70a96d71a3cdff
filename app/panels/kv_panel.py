"""Panel 6, the KV cache: positions cached per layer, bytes with the arithmetic, growth, timings.

Three plots built once, each in its own view: keys and values cached per layer, the cache's size
after every step, and each step's forward-pass time (the prefill, labelled, against the cheaper
decode steps and their mean). Step and layer axes tick on whole numbers only.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QProgressBar, QVBoxLayout, QWidget

from app.window import theme as th
from app.logic.state import AppState
from app.logic.wording import UNITS, human_bytes
from app.panels.empty_note import EmptyNote
from app.panels.steady_label import SteadyLabel
from app.window.guard import guarded


def grouped_heads_sentence(kv, info) -> str:
    """With fewer key/value heads than query heads: bytes per position against what full heads would need."""
    if kv.bytes_per_position >= kv.full_heads_bytes_per_position:
        return ""
    return (f". Grouped heads: {info.n_head} query heads share {info.kv_heads} key/value heads, so each position "
            f"adds {human_bytes(kv.bytes_per_position)}, not the {human_bytes(kv.full_heads_bytes_per_position)} "
            f"full heads would need ({kv.full_heads_bytes_per_position / kv.bytes_per_position:.0f}× smaller)")


def _unit(n: int) -> tuple[str, int]:
    """The unit human_bytes would use for ``n`` bytes, and its size."""
    return next(((u, size) for u, size in UNITS if n >= size), ("B", 1))


class IntegerAxis(pg.AxisItem):
    """An axis that ticks whole numbers only: steps and layers are counted, never halved."""

    @guarded(fallback=lambda self, *a: pg.AxisItem.tickSpacing(self, *a))
    def tickSpacing(self, minVal, maxVal, size):
        levels = [(s, 0.0) for s, _ in super().tickSpacing(minVal, maxVal, size) if s >= 1 and float(s).is_integer()]
        return levels or [(1.0, 0.0)]


class KVPanel(QGroupBox):
    """What the KV cache holds after the current step and how it got there."""

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("6 · KV cache: what the model remembers between steps", parent)
        self.short_title = "6 KV cache"
        self.state = state
        self.capacity = QProgressBar()
        self.capacity.setTextVisible(True)
        self.bytes_label = SteadyLabel()
        self._bytes = ("", "")  # the bytes sentence whole, and without its grouped-heads sentence
        self._short = False  # a narrow, short panel: the grouped-heads sentence is in the tooltip
        self._probe = QLabel()  # never shown: how tall the bytes sentence is at a width
        self._probe.setWordWrap(True)
        self._label_heights: dict[tuple, int] = {}
        self._least: tuple[tuple, QSize] | None = None  # (what minimumSizeHint read, what it answered)

        # one view per plot: the window paints one view per event-loop turn, and the three together
        # were the longest turn of a step
        self.layer_view, self.growth_view, self.time_view = views = [
            th.plot_widget(axisItems={"bottom": IntegerAxis("bottom")}, title=title)
            for title in (
                "positions cached, per layer",
                "cache size",
                f"time per step: <span style='color:{th.PREFILL}'>■ prefill</span> vs "
                f"<span style='color:{th.DECODE}'>■ decode</span> (dashed: mean)",
            )
        ]
        self.layer_plot, self.growth_plot, self.time_plot = (view.getPlotItem() for view in views)
        plots = QGridLayout()
        plots.setSpacing(2)
        self._grid = plots
        self._one_row: bool | None = None
        self._arrange(one_row=False)
        self._size_unit = ""
        for plot in (self.layer_plot, self.growth_plot, self.time_plot):
            th.fix_plot(plot).showGrid(y=True, alpha=0.25)
        self.key_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.KEYS, pen=None)
        self.value_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.VALUES, pen=pg.mkPen(th.DARK, width=1))
        self.layer_plot.addItem(self.key_bars)
        self.layer_plot.addItem(self.value_bars)
        self.growth = self.growth_plot.plot([], [], pen=pg.mkPen(th.NEUTRAL, width=2), symbol="o", symbolSize=5, symbolBrush=th.NEUTRAL)
        self._prefill_brush, self._decode_brush = pg.mkBrush(th.PREFILL), pg.mkBrush(th.DECODE)
        self.time_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brushes=[], pen=None)
        self.time_plot.addItem(self.time_bars)
        # both labels hang in the headroom above the tallest bar: top left and top right
        self.prefill_text = pg.TextItem(anchor=(0, 0), color=th.PREFILL)
        self.decode_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(th.NEUTRAL, width=1.5, style=Qt.DashLine))
        self.decode_text = pg.TextItem(anchor=(1, 0), color=th.NEUTRAL)
        for item in (self.prefill_text, self.decode_line, self.decode_text):
            self.time_plot.addItem(item)

        self.empty_notes = [EmptyNote(self.layer_view), EmptyNote(self.growth_view, ""), EmptyNote(self.time_view, "")]
        layout = QVBoxLayout(self)
        layout.addWidget(self.capacity)
        layout.addWidget(self.bytes_label)
        layout.addLayout(plots, 1)
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)


    def plot_views(self) -> list[pg.GraphicsView]:
        """The plot views the window paints, one per event-loop turn after a step."""
        return [self.layer_view, self.growth_view, self.time_view]

    def _on_state_result(self, result) -> None:
        records = result.records
        capacity = int(result.info.n_positions)
        self.capacity.setRange(0, capacity)
        for note in self.empty_notes:
            note.setVisible(not records)
        if not records:
            self.capacity.setValue(0)
            self.capacity.setFormat(f"context window: 0 of {capacity:,} positions cached")
            self._show_bytes("The cache is empty until the prefill runs.")
            for bars in (self.key_bars, self.value_bars):
                bars.setOpts(x=[], height=[])
            self.growth.setData([], [])
            self.time_bars.setOpts(x=[], height=[], brushes=[])
            self.prefill_text.setText("")
            self.decode_text.setText("")
            self.decode_line.hide()
            return
        kv = records[-1].kv
        L = len(kv.key_positions)
        layers = np.arange(L)
        self.key_bars.setOpts(x=layers - 0.2, height=kv.key_positions)
        self.value_bars.setOpts(x=layers + 0.2, height=kv.value_positions)
        self.capacity.setValue(min(kv.positions, capacity))
        self.capacity.setFormat(f"context window: {kv.positions:,} of {capacity:,} positions cached ({kv.positions / capacity:.0%})")
        if result.info.remote_host:  # nothing is cached between remote requests
            self._show_bytes(
                f"No KV cache: each step is one request to {result.info.remote_host}, a full forward pass over the "
                "text so far; the time per step includes the server and the network."
            )
        else:
            short = (f"<b>{human_bytes(kv.total_bytes)}</b> = <span style='color:{th.KEYS}'>■</span>&nbsp;keys and "
                     f"<span style='color:{th.VALUES}'>■</span>&nbsp;values: {kv.arithmetic()}")
            self._show_bytes(short + grouped_heads_sentence(kv, result.info), short)
        steps = np.fromiter((r.step for r in records), np.int64, len(records))
        sizes = np.fromiter((r.kv.total_bytes for r in records), np.float64, len(records))
        ms = np.fromiter((r.forward_ms for r in records), np.float64, len(records))
        unit, scale = _unit(int(sizes.max()))
        if unit != self._size_unit:
            self._size_unit = unit
            self._label_growth_axis()
        self.growth.setData(steps, sizes / scale)
        # axis ends rounded up to nice values: an axis repaints its labels only when its range changes
        last = th.nice_ceil(max(1, len(records) - 1))
        self.time_plot.setXRange(-0.6, last + 0.6, padding=0)
        top = th.nice_ceil(float(ms.max()) * 1.45)  # headroom for the labels
        self.time_plot.setYRange(0, top, padding=0)
        self.growth_plot.setXRange(0, last, padding=0.05)
        self.growth_plot.setYRange(0, th.nice_ceil(float(sizes.max()) / scale), padding=0.05)
        self.layer_plot.setYRange(0, th.nice_ceil(float(max(kv.key_positions.max(), kv.value_positions.max()))), padding=0.02)
        self.time_bars.setOpts(
            x=steps, height=ms, brushes=[self._prefill_brush] + [self._decode_brush] * (len(records) - 1)
        )
        prefill = records[0]
        self.prefill_text.setText(f"prefill: {prefill.forward_ms:.0f} ms")
        self.prefill_text.setPos(-0.6, top)
        if len(records) > 1:
            mean = float(ms[1:].mean())
            self.decode_line.setValue(mean)
            self.decode_line.show()
            self.decode_text.setText(f"decode: {mean:.0f} ms (mean)")
            self.decode_text.setPos(last + 0.6, top)
        else:
            self.decode_line.hide()
            self.decode_text.setText("")
        self.time_plot.setToolTip(
            f"Time to first token (the prefill, {prefill.n_new} positions in one pass): {prefill.forward_ms:.1f} ms"
            + (f"; a decode step (one position), mean of {len(records) - 1}: {ms[1:].mean():.1f} ms" if len(records) > 1 else "")
        )

    def _show_bytes(self, whole: str, short: str | None = None) -> None:
        """The bytes sentence: whole, or without its grouped-heads sentence (then in the tooltip) while
        the panel is too short for it over the plots in two rows."""
        self._bytes = (whole, whole if short is None else short)
        self._fit_bytes(force=True)

    def _fit_bytes(self, *, force: bool = False) -> None:
        whole, short = self._bytes
        cut = short != whole and not self._one_row and self.height() < self._height(whole, self.width(), one_row=False)
        if cut != self._short or force:
            if cut != self._short:
                self.bytes_label.start_over()
            self._short = cut
            self.bytes_label.setText(short if cut else whole)
            self.bytes_label.setToolTip(whole if cut else "")

    def _height(self, text: str, width: int, *, one_row: bool) -> int:
        """The panel's least height with ``text`` as the bytes sentence at a panel ``width`` wide."""
        m, spacing = self.layout().contentsMargins(), self.layout().spacing()
        views = (self.layer_view, self.growth_view, self.time_view)
        if one_row:
            plots = max(v.minimumHeight() for v in views)
        else:
            plots = max(self.layer_view.minimumHeight(), self.growth_view.minimumHeight()) + self._grid.spacing() + self.time_view.minimumHeight()
        inner = width - m.left() - m.right() - self.contentsMargins().left() - self.contentsMargins().right()
        label = self._label_height(text, max(1, inner)) if text else 0
        frame = self.contentsMargins()  # the title's line and the frame
        return frame.top() + frame.bottom() + m.top() + m.bottom() + self.capacity.sizeHint().height() + label + plots + 2 * spacing

    def _label_height(self, text: str, width: int) -> int:
        """The bytes line's height for ``text`` at ``width``, measured once per text, width and font
        (the layouts ask for the panel's least size many times a step)."""
        key = (text, width, self.bytes_label.font().key())
        found = self._label_heights.get(key)
        if found is None:
            if len(self._label_heights) > 64:
                self._label_heights.clear()
            self._probe.setFont(self.bytes_label.font())
            self._probe.setText(text)
            found = self._label_heights[key] = self._probe.heightForWidth(width)
        return found

    def _two_row_width(self) -> int:
        return max(self.layer_view.minimumWidth() + self.growth_view.minimumWidth() + self._grid.spacing(), self.time_view.minimumWidth())

    def _label_growth_axis(self) -> None:
        theme = self.state.theme
        style = {"color": theme.text, "font-size": theme.css_size(-1)}
        self.growth_plot.setLabel("left", self._size_unit or "B", **style)

    def _on_state_theme(self, theme: th.Theme) -> None:
        th.style_plot(self.layer_plot, theme, bottom="layer")
        th.style_plot(self.growth_plot, theme, bottom="step")
        th.style_plot(self.time_plot, theme, left="ms", bottom="step (0 = prefill)")
        self._label_growth_axis()
        for plot in (self.layer_plot, self.growth_plot, self.time_plot):
            th.fix_axis_width(plot, theme, 5)  # up to "1,024" positions or "999.9" units
            plot.setTitle(plot.titleLabel.text, size=theme.css_size(-1), color=theme.text)
        for text in (self.prefill_text, self.decode_text):
            text.setFont(theme.font(-1, bold=True))
        px = theme.text_px()
        self._needs = [
            (plot, th.need_area(view, plot, w * px, 5 * px // 2))
            for plot, view, w in ((self.layer_plot, self.layer_view, 8), (self.growth_plot, self.growth_view, 5))
        ]
        bold = QFontMetrics(theme.font(-1, bold=True))  # the prefill and decode labels side by side
        texts = bold.horizontalAdvance("prefill: 9999 ms") + bold.horizontalAdvance("decode: 999 ms (mean)") + 2 * px
        self._needs.append((self.time_plot, th.need_area(self.time_view, self.time_plot, max(12 * px, texts), 5 * px // 2)))

    def _arrange(self, *, one_row: bool) -> None:
        """The three plots in one row (a wide, short panel: alone on a projector's page) or the
        time plot under the other two (a column)."""
        if one_row == self._one_row:
            return
        self._one_row = one_row
        grid = self._grid
        for view in (self.layer_view, self.growth_view, self.time_view):
            grid.removeWidget(view)
        for i in range(3):
            grid.setRowStretch(i, 0)
            grid.setColumnStretch(i, 0)
        if one_row:
            grid.addWidget(self.layer_view, 0, 0)
            grid.addWidget(self.growth_view, 0, 1)
            grid.addWidget(self.time_view, 0, 2)
            for column, stretch in enumerate((3, 2, 4)):
                grid.setColumnStretch(column, stretch)
        else:
            grid.addWidget(self.layer_view, 0, 0)
            grid.addWidget(self.growth_view, 0, 1)
            grid.addWidget(self.time_view, 1, 0, 1, 2)
            grid.setRowStretch(0, 5)
            grid.setRowStretch(1, 6)
            grid.setColumnStretch(0, 3)
            grid.setColumnStretch(1, 2)

    def _row_width(self) -> int:
        """The width the three plots need side by side."""
        margins = self.layout().contentsMargins() if self.layout() else None
        side = (margins.left() + margins.right()) if margins else 20
        return sum(v.minimumWidth() for v in (self.layer_view, self.growth_view, self.time_view)) + 4 + side + 8

    @guarded(fallback=lambda self: QSize())
    def minimumSizeHint(self) -> QSize:
        """As narrow as the plots in two rows; as short as the plots in one row where the panel is wide
        enough for them, else as the plots in two rows under the bytes sentence less its grouped-heads
        sentence (then in its tooltip): a short window gives it a page of its own. The layouts ask
        about 40 times a drawn step: worked out again only when what it reads changed (the sentence,
        the width, or what its layout's own least size follows: the fonts, the plots' least sizes)."""
        key = (self._bytes, self.width(), super().minimumSizeHint())
        if self._least is None or self._least[0] != key:
            self._least = (key, self._least_size())
        return QSize(self._least[1])

    def _least_size(self) -> QSize:
        m = self.layout().contentsMargins()
        frame = self.contentsMargins()
        width = max(self.capacity.minimumSizeHint().width(), self._two_row_width()) + m.left() + m.right() + frame.left() + frame.right()
        whole, short = self._bytes
        # at the width it has: one row under the whole sentence where the row fits (a panel wide but
        # too tall for one row is taller than two rows need), else two rows under the sentence less
        # its grouped heads (the least a panel narrower than the row can be)
        if self.width() >= self._row_width():
            height = self._height(whole, self.width(), one_row=True)
        else:
            height = self._height(short, max(width, self.width()), one_row=False)
        return QSize(width, height)

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # one row only in a wide, short panel: in a tall column the plots would be thin slivers
        self._arrange(one_row=self.width() >= self._row_width() and self.width() > 1.5 * self.height())
        self._fit_bytes()

    def plot_needs(self) -> list:
        """(plot, (width, height)): the drawing area each plot needs to be read."""
        return self._needs

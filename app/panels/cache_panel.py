"""The KV cache, opened: the keys and values it holds, and what generating without it costs.

For the layer and head chosen in the attention panel: the key vectors and the value vectors of
every cached position (positions × d_head, as two heat maps), the row the current step appended
outlined, and the newest position's query beside the keys: that query is compared with every cached
key. Back drops rows and they are gone here too (the maps hold exactly what the cache holds: the
engine reads them for this view, ``controller.inspect``).

Below, the time of each forward pass against the length of the context, with the cache (one new
position against the cached keys and values: flat) and without it (Run → Generate without the KV
cache: the whole sequence again: growing), gathered over this session on this machine.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer, Signal
from PySide6.QtWidgets import QGridLayout, QVBoxLayout, QWidget


from app.window import theme as th
from app.window.guard import guarded
from app.logic.forward_times import ForwardTimes
from app.logic.state import AppState
from app.panels.empty_note import EmptyNote
from app.panels.heatmap import heatmap_view, room_for_row_names, show_heat
from app.panels.kv_panel import IntegerAxis
from app.panels.steady_label import SteadyLabel


NO_TIMES = ("No step timed yet: each step after the prompt's own (the prefill) is a dot here, its forward pass's "
            "time against the context's length.")


def row_ticks(rows: int, pieces, height: int, text_px: int) -> list[tuple[float, str]]:
    """Left-axis ticks of a map with one row per position: on each row's middle, "token position",
    every n-th row so that labels stand at least a line of text apart, always the newest row."""
    every = max(1, int(np.ceil(rows * text_px * 1.15 / max(1, height - 2 * text_px))))
    shown = sorted({*range(0, rows, every), rows - 1}) if rows else []
    if len(shown) > 1 and shown[-1] - shown[-2] < every:  # the newest crowds the one before it
        del shown[-2]
    return [(i + 0.5, f"{pieces[i] if i < len(pieces) else ''} {i}".strip()) for i in shown]  # the token whole: cut, it reads as another


class CachePanel(QWidget):
    """Keys, values and the newest query of one layer and head, and step times with and without the cache."""

    inspectRequested = Signal(int, int, int)  # step, position, layer

    def __init__(self, state: AppState, times: ForwardTimes, parent: QWidget | None = None):
        """``times``: the session's step times, kept since the window started (this view may be built later)."""
        super().__init__(parent)
        self.state, self._forward = state, times
        # labels that keep the height their text needs: squeezed, the layout cut them to one line
        self.header = SteadyLabel("Step once to see what the KV cache holds.")
        self.keys_view, self.keys_image = heatmap_view()
        self.values_view, self.values_image = heatmap_view()
        self.query_view, self.query_image = heatmap_view()
        self.keys_caption, self.values_caption, self.query_caption = SteadyLabel(), SteadyLabel(), SteadyLabel()
        self.query_view.setFixedHeight(120)
        self.query_view.getPlotItem().hideAxis("left")  # one row: no position axis
        self.time_view = th.plot_widget(axisItems={"bottom": IntegerAxis("bottom")})  # a context has no half positions
        self.time_view.setMinimumHeight(170)  # readable beside heat maps that take what is left
        tp = self.time_view.getPlotItem()
        th.fix_plot(tp)
        tp.showGrid(x=True, y=True, alpha=0.25)
        tp.addLegend(offset=(8, 4))
        self.cached_points = pg.ScatterPlotItem(size=8, brush=pg.mkBrush(th.BLUE), pen=None, name="with the KV cache")
        self.uncached_points = pg.ScatterPlotItem(size=8, brush=pg.mkBrush(th.VERMILION), pen=None,
                                                  name="without it: the whole sequence again")
        tp.addItem(self.cached_points)
        tp.addItem(self.uncached_points)
        self.time_caption = SteadyLabel()
        self.time_note = EmptyNote(self.time_view, NO_TIMES)  # words, not an empty grid, until a decode step is timed
        grid = QGridLayout()
        grid.addWidget(self.query_caption, 0, 0)
        grid.addWidget(self.keys_caption, 0, 1)
        grid.addWidget(self.values_caption, 0, 2)
        grid.addWidget(self.query_view, 1, 0)
        grid.addWidget(self.keys_view, 1, 1)
        grid.addWidget(self.values_view, 1, 2)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 3)
        grid.setColumnStretch(2, 3)
        grid.setRowStretch(1, 3)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(grid, 3)
        layout.addWidget(self.time_caption)
        layout.addWidget(self.time_view, 2)
        self._asked: tuple[int, int, int] | None = None
        self._shown: tuple[int, int, int] | None = None
        self.trace = None
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        return []  # drawn when the engine answers, not in a step's turns

    # ------------------------------------------------------------ asking
    def wants(self, trace) -> bool:
        return self._asked is not None and (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1) == self._asked

    def awaiting(self) -> bool:
        return self._asked is not None and self._asked != self._shown

    def refresh(self) -> None:
        result = self.state.result
        if result is None or result.trace is None or not self.isVisible():
            return
        wanted = (result.trace.step, result.trace.record.end - 1, self.state.layer)
        if wanted != self._asked:
            self._asked = wanted
            self.inspectRequested.emit(*wanted)

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._draw_times()
        QTimer.singleShot(0, self.refresh)

    def _on_state_result(self, result) -> None:
        if self.isVisible():  # hidden, a step costs this view nothing: it draws when shown
            self._draw_times()
        if result.trace is None:
            self._asked = self._shown = None
            self.trace = None
            for image in (self.keys_image, self.values_image, self.query_image):
                image.clear()
                image.outline.setRect(QRectF())
            self.header.setText("Step once: the KV cache fills at the prefill and grows by one position each step.")
            return
        self.refresh()

    def _on_state_selection(self, _value: int) -> None:
        if self.trace is not None and self.state.layer in self.trace.kv_layers:
            self._draw()
        else:
            self.refresh()

    # ------------------------------------------------------------ drawing
    def show_inside(self, trace) -> None:
        self.trace = trace
        self._shown = (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1)
        self._draw()

    def _draw(self) -> None:
        t = self.trace
        result = self.state.result
        layer, head = self.state.layer, min(self.state.head, t.n_head - 1)
        if layer not in t.kv_layers:
            return
        i = t.kv_layers.index(layer)
        kv_head = t.kv_of(head)  # grouped heads: the key/value head this query head reads
        keys, values = t.keys[i, kv_head], t.values[i, kv_head]  # [T, dh]
        T, dh = keys.shape
        cached = result is not None and result.trace is not None and result.trace.record.kv.positions > 0
        newest = result.trace.record.n_new if result is not None and result.trace is not None else 1
        for image, data in ((self.keys_image, keys), (self.values_image, values)):
            show_heat(image, data)
            image.outline.setRect(QRectF(0, T - newest, dh, newest))  # the rows this step appended
        show_heat(self.query_image, t.q[layer, head][None, :])
        self.query_image.outline.setRect(QRectF())
        for view, rows in ((self.keys_view, T), (self.values_view, T), (self.query_view, 1)):
            view.getPlotItem().setRange(xRange=(0, dh), yRange=(0, rows), padding=0)
        pieces = result.trace.pieces if result is not None and result.trace is not None else ()
        for view in (self.keys_view, self.values_view):
            view.getPlotItem().getAxis("left").setTicks([row_ticks(T, pieces, view.height(), self.state.theme.text_px(-1))])
        bytes_per_value = result.trace.record.kv.bytes_per_value if result is not None and result.trace is not None else 4
        where = ("what the KV cache holds after this step" if cached else
                 "what a cache would hold: this run keeps none (Run → Generate without the KV cache is on)")
        kvs = t.kv_heads
        self.header.setText(
            f"Layer {layer}, head {head}, after step {t.step}: {where}. One row per position, in all {t.n_layer} layers "
            f"and {kvs} {'key/value ' if kvs < t.n_head else ''}heads: 2 × {t.n_layer} layers × {T:,} positions × "
            f"{kvs} × {dh} × {bytes_per_value} bytes = {2 * t.n_layer * T * dh * kvs * bytes_per_value:,} bytes."
            + (f" Query head {head} reads key/value head {kv_head}: {t.n_head} query heads share {kvs}, so the cache "
               f"is {t.n_head // kvs}× smaller than with full heads ({2 * t.n_layer * T * dh * t.n_head * bytes_per_value:,} bytes)."
               if kvs < t.n_head else "")
        )
        self.query_caption.setText(f"<b>query</b> of the newest position {t.position} ({dh} numbers)")
        self.keys_caption.setText(
            f"<b>keys</b>, {T:,} positions × {dh}: the query is compared with every row; the outlined row"
            f"{'s were' if newest > 1 else ' was'} added by this step"
        )
        self.values_caption.setText(f"<b>values</b>, {T:,} × {dh}: mixed by the attention weights")

    def _draw_times(self) -> None:
        times = self._forward.times
        for points, cached in ((self.cached_points, True), (self.uncached_points, False)):
            xs = [T for (c, T) in times if c == cached]
            ys = [times[(cached, T)] for T in xs]
            points.setData(xs, ys)
        with_cache = [ms for (c, _), ms in times.items() if c]
        without = [ms for (c, _), ms in times.items() if not c]
        summary = "Each dot: one decode step's forward pass, against the context's length. "
        if with_cache and without:
            summary += (f"With the cache a step took {np.median(with_cache):.0f} ms (median), without it "
                        f"{np.median(without):.0f} ms, and without it the time grows with the length.")
        else:
            summary += "Run → Generate without the KV cache for a few steps: each then runs the whole sequence again."
        self.time_caption.setText(summary)
        self.time_note.setVisible(not times)
        plot = self.time_view.getPlotItem()
        th.style_plot(plot, self.state.theme, left="ms", bottom="positions in the context")
        if times:  # from 0 on both axes: flat reads flat, growth reads as growth
            plot.setRange(xRange=(0, max(T for _, T in times) * 1.05), yRange=(0, max(times.values()) * 1.2), padding=0)

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        for view in (self.keys_view, self.values_view, self.query_view, self.time_view):
            th.style_plot(view.getPlotItem(), theme)  # the legend too, at the mode's size
        for view in (self.keys_view, self.values_view):  # the first row's name whole
            room_for_row_names(view.getPlotItem(), theme)
        self._draw_times()

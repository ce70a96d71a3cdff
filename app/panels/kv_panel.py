"""Panel 6, the KV cache: positions cached per layer, bytes with the arithmetic, growth, timings.

Three plots built once: keys and values cached per layer, the cache's size after every step, and
each step's forward-pass time (the prefill against the cheaper decode steps).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGroupBox, QLabel, QProgressBar, QVBoxLayout, QWidget

from .. import theme as th
from ..state import AppState


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class KVPanel(QGroupBox):
    """What the KV cache holds after the current step and how it got there."""

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("KV cache: what the model remembers between steps", parent)
        self.state = state
        self.capacity = QProgressBar()
        self.capacity.setTextVisible(True)
        self.bytes_label = QLabel()
        self.timing_label = QLabel()
        for label in (self.bytes_label, self.timing_label):
            label.setWordWrap(True)

        self.view = pg.GraphicsLayoutWidget()
        self.layer_plot: pg.PlotItem = self.view.addPlot(row=0, col=0, title=f"positions per layer: <span style='color:{th.BLUE}'>keys</span> | <span style='color:{th.ORANGE}'>values</span>")
        self.growth_plot: pg.PlotItem = self.view.addPlot(row=0, col=1, title="cache size per step (KB)")
        self.time_plot: pg.PlotItem = self.view.addPlot(row=1, col=0, colspan=2, title="forward pass per step (ms; red = prefill)")
        for plot in (self.layer_plot, self.growth_plot, self.time_plot):
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(False, False)
            plot.showGrid(y=True, alpha=0.25)
        self.key_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.BLUE, pen=None)
        self.value_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.ORANGE, pen=None)
        self.layer_plot.addItem(self.key_bars)
        self.layer_plot.addItem(self.value_bars)
        self.growth = self.growth_plot.plot([], [], pen=pg.mkPen(th.BLUE, width=2), symbol="o", symbolSize=5, symbolBrush=th.BLUE)
        self._prefill_brush, self._decode_brush = pg.mkBrush(th.VERMILION), pg.mkBrush(th.SKY)
        self.time_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brushes=[], pen=None)
        self.time_plot.addItem(self.time_bars)

        layout = QVBoxLayout(self)
        layout.addWidget(self.capacity)
        layout.addWidget(self.bytes_label)
        layout.addWidget(self.timing_label)
        layout.addWidget(self.view, 1)
        state.resultChanged.connect(self._on_state_result)
        state.themeChanged.connect(self._on_state_theme)
        self._on_state_theme(state.theme)

    def _on_state_result(self, result) -> None:
        records = result.records
        capacity = int(result.info.n_positions)
        self.capacity.setRange(0, capacity)
        if not records:
            self.capacity.setValue(0)
            self.capacity.setFormat(f"context window: 0 of {capacity:,} positions cached")
            self.bytes_label.setText("The cache is empty until the prefill runs.")
            self.timing_label.setText("")
            for bars in (self.key_bars, self.value_bars):
                bars.setOpts(x=[], height=[])
            self.growth.setData([], [])
            self.time_bars.setOpts(x=[], height=[], brushes=[])
            return
        kv = records[-1].kv
        L = len(kv.key_positions)
        layers = np.arange(L)
        self.key_bars.setOpts(x=layers - 0.2, height=kv.key_positions)
        self.value_bars.setOpts(x=layers + 0.2, height=kv.value_positions)
        self.capacity.setValue(min(kv.positions, capacity))
        self.capacity.setFormat(f"context window: {kv.positions:,} of {capacity:,} positions cached ({kv.positions / capacity:.0%})")
        self.bytes_label.setText(
            f"<b>{human_bytes(kv.total_bytes)}</b> = keys and values: {kv.arithmetic()}"
        )
        steps = np.fromiter((r.step for r in records), np.int64, len(records))
        sizes = np.fromiter((r.kv.total_bytes for r in records), np.float64, len(records)) / 1024
        ms = np.fromiter((r.forward_ms for r in records), np.float64, len(records))
        self.growth.setData(steps, sizes)
        self.time_plot.setXRange(-0.6, len(records) - 0.4, padding=0)
        self.growth_plot.setXRange(0, max(1, len(records) - 1), padding=0.05)
        self.time_bars.setOpts(
            x=steps, height=ms, brushes=[self._prefill_brush] + [self._decode_brush] * (len(records) - 1)
        )
        prefill = records[0]
        text = f"Time to first token (prefill, {prefill.n_new} positions in one pass): <b>{prefill.forward_ms:.1f} ms</b>"
        if len(records) > 1:
            text += f" · per decode step (one position, mean of {len(records) - 1}): <b>{ms[1:].mean():.1f} ms</b>"
        self.timing_label.setText(text)

    def _on_state_theme(self, theme: th.Theme) -> None:
        th.style_plot(self.layer_plot, theme, left="positions", bottom="layer")
        th.style_plot(self.growth_plot, theme, bottom="step")
        th.style_plot(self.time_plot, theme, bottom="step (0 = prefill)")
        for plot in (self.layer_plot, self.growth_plot, self.time_plot):
            plot.setTitle(plot.titleLabel.text, size=f"{theme.font_pt}pt", color=theme.text)
        self.setFont(theme.font())

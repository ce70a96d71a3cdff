"""The Inside view's pictures: a vector as a strip of colours, one value per position (or per
expert) as bars, a heat map of keys or values, and the small table and label helpers its parts share.

Every chart keeps its axes and ticks at any width: the bars' labels are every n-th one (n = 1, 2, 5,
10, …), n measured from the labels' own text and the plot's width whenever it is resized
(``spaced_ticks``), so no two tick labels are drawn over each other.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QGroupBox, QHeaderView, QLabel, QTableWidget, QVBoxLayout, QWidget

from app.window import theme as th
from app.panels.heatmap import DIVERGING, heatmap_view, show_heat

STRIP_H = 46  # pixels of a vector strip's plot
STEPS = (1, 2, 5)  # label every n-th tick: n = 1, 2, 5, 10, 20, 50, …


def norm(x: np.ndarray) -> float:
    """The length (L2 norm) of ``x``, in float64."""
    return float(np.linalg.norm(np.asarray(x, dtype=np.float64)))


def tick_step(widths: list[int], px_per_unit: float, gap: int) -> int:
    """The smallest n of 1, 2, 5, 10, 20, … such that labels ``widths`` pixels wide, one every n units
    of ``px_per_unit`` pixels, stand at least ``gap`` pixels apart."""
    need = (max(widths) if widths else 0) + gap
    scale = 1
    while True:
        for n in STEPS:
            if n * scale * px_per_unit >= need or n * scale >= max(1, len(widths)):
                return n * scale
        scale *= 10


def spaced_ticks(axis: pg.AxisItem, labels: list[str], positions, plot: pg.PlotItem) -> None:
    """Set ``axis``'s ticks to every n-th of ``labels`` (at ``positions``, in data units), n as
    small as lets the labels stand apart at the plot's present width in the axis's font."""
    positions = list(positions)
    if not labels:
        axis.setTicks([[]])
        return
    metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
    widths = [max(metrics.horizontalAdvance(line) for line in text.split("\n")) for text in labels]
    low, high = plot.vb.viewRange()[0]
    px_per_unit = plot.vb.width() / max(high - low, 1e-9)
    step = tick_step(widths, px_per_unit, metrics.height() // 2)
    axis.setTicks([[(positions[i], labels[i]) for i in range(0, len(labels), step)]])


class CaptionedPlot(QWidget):
    """A caption above a plot of fixed height that zooms and pans along x only (long vectors and
    contexts: 3,072 MLP units, 1,000 positions)."""

    def __init__(self, title: str, height: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        self.caption = QLabel(title)
        self.caption.setWordWrap(True)
        self.view = th.plot_widget()
        self.view.setFixedHeight(height)
        self.plot = self.view.getPlotItem()
        th.fix_plot(self.plot)
        self.plot.setMouseEnabled(x=True, y=False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.setSpacing(1)
        layout.addWidget(self.caption)
        layout.addWidget(self.view)
        self.values = np.zeros(0, np.float32)

    def restyle(self, theme: th.Theme) -> None:
        """Room for the axes' text in ``theme``'s font."""


class VectorStrip(CaptionedPlot):
    """One vector as a strip of colours (one column per dimension), with a caption above it."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(title, STRIP_H, parent)
        self.plot.hideAxis("left")
        self.plot.getAxis("bottom").setHeight(18)
        self.image = pg.ImageItem()
        self.image.setColorMap(pg.colormap.get(DIVERGING))
        self.plot.addItem(self.image)

    def restyle(self, theme: th.Theme) -> None:
        """Room for the dimension numbers under the strip in ``theme``'s font (a projector's too)."""
        axis = theme.text_px(-1) + 8
        self.plot.getAxis("bottom").setHeight(axis)
        self.view.setFixedHeight(STRIP_H - 18 + axis)

    def show_vector(self, values: np.ndarray, note: str = "") -> None:
        values = np.asarray(values, dtype=np.float32).ravel()
        self.values = values
        scale = float(np.max(np.abs(values))) or 1.0
        self.image.setImage(values[None, :], autoLevels=False, levels=(-scale, scale))
        self.image.setRect(0, 0, len(values), 1)
        self.plot.setRange(xRange=(0, len(values)), yRange=(0, 1), padding=0)
        self.caption.setText(
            f"<b>{self.title}</b> · {len(values):,} numbers · length {norm(values):.2f} · "
            f"colour scale ±{scale:.2f}{(' · ' + note) if note else ''}"
        )


class PositionBars(CaptionedPlot):
    """One value per visible position (scores, attention weights) or per expert (the router), a label
    under every n-th bar (n measured so that no two labels meet); ``mark`` colours some bars and
    writes a number over each (the router's chosen experts and their weights)."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(title, 150, parent)
        self.plot.showGrid(y=True, alpha=0.25)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.plot.addItem(self.bars)
        self.labels: list[str] = []
        self.lines = 2  # lines of tick text: a token over its position
        self.marked: list[int] = []
        self.marks: list[pg.TextItem] = []
        self._font = None
        self._theme = None
        self.plot.vb.sigResized.connect(self._on_view_resized)

    def restyle(self, theme: th.Theme) -> None:
        """``lines`` lines of tick text under the bars and a y axis with room for its numbers, in
        ``theme``'s font."""
        self._theme = theme
        axis = self.lines * theme.text_px(-1) + 10
        self.plot.getAxis("bottom").setHeight(axis)
        th.fix_axis_width(self.plot, theme, 5)  # "-12.5", "0.25"
        self.view.setFixedHeight(110 + axis)
        self._font = theme.font(-1)
        for text in self.marks:
            text.setFont(self._font)
        self._tick()

    def show_values(self, values: np.ndarray, labels: list[str], note: str, color: str, *, lines: int = 2,
                    headroom: float = 1.0) -> None:
        """Bars of ``values`` labelled ``labels`` (``lines`` lines each), the y range ``headroom``
        times the tallest bar's."""
        values = np.asarray(values, dtype=np.float32)
        self.values = values
        if lines != self.lines:
            self.lines = lines
            if self._theme is not None:  # room for that many lines of tick text
                self.restyle(self._theme)
        self.labels = list(labels)
        x = np.arange(len(values))
        self.bars.setOpts(x=x, height=values, width=0.8, brush=pg.mkBrush(color), brushes=None, pen=None)
        low, high = min(0.0, float(values.min(initial=0))), max(0.0, float(values.max(initial=0)))
        if high == low:
            high = low + 1.0
        self.plot.setRange(xRange=(-0.5, max(len(values), 1) - 0.5), yRange=(low, high * headroom), padding=0.05)
        self.caption.setText(f"<b>{self.title}</b> · {note}")
        self._clear_marks()
        self._tick()

    def mark(self, indices, weights, color: str) -> None:
        """Draw the bars at ``indices`` in ``color`` and write ``weights`` (one per index) over them."""
        self._clear_marks()
        chosen = [int(i) for i in indices]
        base = self.bars.opts["brush"]
        self.bars.setOpts(brushes=[pg.mkBrush(color) if i in chosen else base for i in range(len(self.values))])
        self.marked = sorted(chosen)
        for i, w in zip(chosen, weights):
            text = pg.TextItem(f"×{float(w):.2f}", color=th.DARK, anchor=(0.5, 1.0))
            if self._font is not None:
                text.setFont(self._font)
            text.setPos(i, float(self.values[i]))
            self.plot.addItem(text)
            self.marks.append(text)

    def _clear_marks(self) -> None:
        for text in self.marks:
            self.plot.removeItem(text)
        self.marks = []
        self.marked = []

    def _tick(self) -> None:
        spaced_ticks(self.plot.getAxis("bottom"), self.labels, range(len(self.labels)), self.plot)

    def _on_view_resized(self, *_args) -> None:
        self._tick()


def table() -> QTableWidget:
    """A read-only table whose columns fit their text."""
    t = QTableWidget()
    t.setEditTriggers(QTableWidget.NoEditTriggers)
    t.verticalHeader().setVisible(False)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
    return t


def fit_rows(t: QTableWidget) -> None:
    """Make ``t`` exactly as tall as its rows: the view scrolls, not the table."""
    t.resizeRowsToContents()
    rows = sum(t.rowHeight(r) for r in range(t.rowCount()))
    t.setFixedHeight(t.horizontalHeader().height() + rows + 4)


def label(text: str = "") -> QLabel:
    """A label that wraps its words."""
    widget = QLabel(text)
    widget.setWordWrap(True)
    return widget


def part_box(title: str, widgets: list[QWidget]) -> QGroupBox:
    """A titled box holding ``widgets`` one under the other: one part of the path."""
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.setSpacing(4)
    for widget in widgets:
        layout.addWidget(widget)
    return box


def heatmap(title: str) -> tuple[pg.PlotWidget, pg.ImageItem, QLabel]:
    """A heat map of positions × dimensions with its caption above it."""
    view, image = heatmap_view()
    view.setFixedHeight(160)
    view.getPlotItem().setLabel("left", "position")
    view.getPlotItem().setLabel("bottom", "dimension")
    return view, image, label(title)


def show_heatmap(image: pg.ImageItem, view: pg.PlotWidget, values: np.ndarray) -> None:
    """``values`` [positions, dimensions] in ``image``, the whole of it in view."""
    show_heat(image, values)
    view.getPlotItem().setRange(xRange=(0, values.shape[1]), yRange=(0, values.shape[0]), padding=0)

"""Panel 2, embeddings: every token as a point on the model's fixed 2-D PCA basis.

A slider picks how deep to look: the embeddings (token + position) or the residual stream after
any block. The axes never move between steps (the basis is fit once per model), so a point moves
only when its vector does. The selected token's path through every layer is drawn as a line.
Items are built once; a step calls ``setData``; at most ``MAX_LABELS`` text labels are reused.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from .. import theme as th
from ..state import LATEST, AppState

MAX_LABELS = 16


class EmbeddingsPanel(QGroupBox):
    """Token positions in 2-D at a chosen depth, with the selected token's path through the layers."""

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("Embeddings and the residual stream (2-D PCA)", parent)
        self.state = state
        self.depth = 0  # 0 = embeddings, i = after block i - 1
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(0, 1)
        self.slider.setPageStep(1)
        self.slider.setTickPosition(QSlider.TicksBelow)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.depth_label = QLabel()
        row = QHBoxLayout()
        row.addWidget(QLabel("Depth"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.depth_label)

        self.view = pg.PlotWidget()
        self.plot: pg.PlotItem = self.view.getPlotItem()
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.path = self.plot.plot([], [], pen=pg.mkPen(th.VERMILION, width=2, style=Qt.DashLine))
        self.path_points = pg.ScatterPlotItem(size=7, brush=pg.mkBrush(th.VERMILION), pen=None)
        self.points = pg.ScatterPlotItem(size=11, hoverable=True, tip=None)
        self.selected = pg.ScatterPlotItem(size=20, brush=None, pen=pg.mkPen(th.DARK, width=2.5))
        self.plot.addItem(self.path_points)
        self.plot.addItem(self.points)
        self.plot.addItem(self.selected)
        self.points.sigClicked.connect(self._on_points_clicked)
        self.labels = [pg.TextItem(anchor=(-0.1, 1.1)) for _ in range(MAX_LABELS)]
        for label in self.labels:
            self.plot.addItem(label)
        self.caption = QLabel()
        self.caption.setWordWrap(True)

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.caption)
        self._brush_prompt = pg.mkBrush(th.BLUE)
        self._brush_generated = pg.mkBrush(th.ORANGE)
        self._n_layer = -1

        state.resultChanged.connect(self._on_state_result)
        state.layerChanged.connect(self._on_state_layer)
        state.positionChanged.connect(self._on_state_position)
        state.themeChanged.connect(self._on_state_theme)
        self._on_state_theme(state.theme)

    # -------------------------------------------------------------- state
    def _on_state_result(self, result) -> None:
        if result.n_layer != self._n_layer:
            self._n_layer = result.n_layer
            self.slider.blockSignals(True)
            self.slider.setRange(0, result.n_layer)
            self.slider.setValue(min(self.depth, result.n_layer))
            self.slider.blockSignals(False)
            self.depth = self.slider.value()
            ex = result.explained
            style = {"color": self.state.theme.text, "font-size": f"{self.state.theme.font_pt}pt"}
            self.plot.setLabel("bottom", f"PC 1 ({ex[0]:.0%} of embedding variance)", **style)
            self.plot.setLabel("left", f"PC 2 ({ex[1]:.0%})", **style)
        self._draw(autorange=True)

    def _on_state_layer(self, layer: int) -> None:
        if self.depth != layer + 1:
            self.slider.setValue(layer + 1)

    def _on_state_position(self, _position: int) -> None:
        self._draw(autorange=False)

    def _on_slider_value_changed(self, value: int) -> None:
        self.depth = value
        if value >= 1:
            self.state.set_layer(value - 1)
        self._draw(autorange=True)

    def _on_points_clicked(self, _item, points, _ev=None) -> None:
        if len(points):
            i = int(points[0].index())
            T = self.state.result.context_len if self.state.result else 0
            self.state.set_position(LATEST if i == T - 1 else i)

    def _on_state_theme(self, theme: th.Theme) -> None:
        th.style_plot(self.plot, theme)
        for label in self.labels:
            label.setFont(theme.font(-1))
        self.depth_label.setFont(theme.font())
        self.caption.setFont(theme.font(-1))
        self._draw(autorange=False)

    # ------------------------------------------------------------ drawing
    def _draw(self, *, autorange: bool) -> None:
        result = self.state.result
        depth = self.depth
        self.depth_label.setText("embeddings (token + position)" if depth == 0 else f"after block {depth - 1}")
        if result is None or result.points.shape[1] == 0:
            self.points.setData([], [])
            self.path.setData([], [])
            self.path_points.setData([], [])
            self.selected.setData([], [])
            for label in self.labels:
                label.setText("")
            self.caption.setText("Step once to place the tokens.")
            return
        pts = result.points  # [L + 1, T, 2]
        T = pts.shape[1]
        depth = min(depth, pts.shape[0] - 1)
        xy = pts[depth]
        prompt_len = len(result.prompt_ids)
        brushes = [self._brush_prompt] * min(prompt_len, T) + [self._brush_generated] * max(0, T - prompt_len)
        self.points.setData(x=xy[:, 0], y=xy[:, 1], brush=brushes, pen=pg.mkPen("w", width=0.8), data=np.arange(T))
        sel = min(max(self.state.selected_position, 0), T - 1)
        path = pts[:, sel]  # [L + 1, 2]
        self.path.setData(path[:, 0], path[:, 1])
        self.path_points.setData(x=path[:, 0], y=path[:, 1])
        self.selected.setData(x=[xy[sel, 0]], y=[xy[sel, 1]])
        pieces = result.trace.pieces if result.trace is not None else result.prompt_pieces
        shown = list(range(max(0, T - MAX_LABELS + 1), T))
        if sel not in shown:
            shown = [sel] + shown[1:]
        for label, i in zip(self.labels, shown + [None] * MAX_LABELS):
            if i is None:
                if label.textItem.toPlainText():
                    label.setText("")
                continue
            label.setText(pieces[i] if i < len(pieces) else "", color=th.VERMILION if i == sel else th.DARK)
            label.setPos(float(xy[i, 0]), float(xy[i, 1]))
        if autorange:
            self.plot.enableAutoRange()
        where = "its embedding" if depth == 0 else f"the residual stream after block {depth - 1}"
        piece = pieces[sel] if sel < len(pieces) else ""
        self.caption.setText(
            f"{T} positions at {where}. Dashed line: position {sel} “{piece}” through all "
            f"{pts.shape[0] - 1} blocks. Blue = prompt, orange = generated."
        )

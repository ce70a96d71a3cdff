"""Panel 2, embeddings: every token as a point on the model's fixed 2-D PCA basis.

A slider picks how deep to look: the embeddings (token + position) or the residual stream after
any block. At the embeddings, a selector shows either part alone on the same axes (the token
embeddings, or the position embeddings joined in position order), so the sum that enters the first
block can be compared with what it is made of. The axes never move between steps (the basis is fit
once per model), so a point moves only when its vector does. The selected token's path through every
layer is drawn as a line.
Items are built once; a step calls ``setData``; at most ``MAX_LABELS`` text labels are reused.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QComboBox, QGroupBox, QHBoxLayout, QLabel, QSlider, QStackedWidget, QVBoxLayout, QWidget

from app.window import theme as th
from app.logic.state import LATEST, AppState
from app.panels.empty_note import EmptyNote
from app.panels.steady_label import SteadyLabel

MAX_LABELS = 16
MODEL_BASIS = "axes: the model's"  # fitted once on its embedding table
CONTEXT_BASIS = "axes: this text"  # fitted on the text's vectors at the depth shown
SUM, TOKEN, POSITION = range(3)  # what the embeddings depth shows (``EmbeddingsPanel.part``)
PARTS = ("sum", "token", "position")  # short: the row also holds the slider and the basis, on a projector too
PART_TIPS = (
    "The sum of the token and the position embeddings: what block 0 reads",
    "The token embeddings alone: one row of the token table per token, whatever its position",
    "The position embeddings alone: one row of the position table per position, whatever its token",
)


GAP = 2  # pixels kept between two labels (and a space more side by side)


NO_POSITION_SENTENCE = (
    "There is no position vector to show: this model adds nothing to the token embedding for its position. "
    "It turns each query and key by an angle that grows with the position (RoPE, in the Inside view), "
    "so attention sees how far apart two tokens are.")


class EmbeddingsPanel(QGroupBox):
    """Token positions in 2-D at a chosen depth, with the selected token's path through the layers."""

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("2 · Embeddings: each token as a point (2-D PCA)", parent)
        self.short_title = "2 Embeddings"
        self.state = state
        self.depth = 0  # 0 = embeddings, i = after block i - 1
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(0, 1)
        self.slider.setPageStep(1)
        self.slider.setTickPosition(QSlider.TicksBelow)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.depth_label = QLabel()
        self.depth_label.setWordWrap(True)
        self.part = QComboBox()  # at the embeddings depth: the sum, or one of its two parts
        for i, (text, tip) in enumerate(zip(PARTS, PART_TIPS)):
            self.part.addItem(text)
            self.part.setItemData(i, tip, Qt.ToolTipRole)
        self.part.setToolTip(
            "What enters block 0 is a sum: the token's embedding (a row of the token table) plus its "
            "position's embedding (a row of the position table). Show the sum, or either part alone, "
            "on the same axes."
        )
        self.part.currentIndexChanged.connect(self._on_part_changed)
        self.depth_what = QStackedWidget()  # the part selector at the embeddings, else "after block i"
        self.depth_what.addWidget(self.part)
        self.depth_what.addWidget(self.depth_label)
        row = QHBoxLayout()
        row.addWidget(QLabel("Depth"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.depth_what, 1)
        self.basis = QComboBox()
        self.basis.addItems([MODEL_BASIS, CONTEXT_BASIS])
        self.basis.setToolTip(
            "Which two directions the plot shows. The model's: fitted once on its embedding table, the "
            "same for every text and depth. This text's: fitted on the vectors of the tokens shown, at "
            "the depth chosen, so it spreads them as far apart as two directions can."
        )
        self.basis.currentIndexChanged.connect(self._on_basis_changed)
        row.addWidget(self.basis)
        self._context_basis: np.ndarray | None = None  # float64 [d, 2]: the last fit, for its signs

        self.view = th.plot_widget()
        self.plot: pg.PlotItem = self.view.getPlotItem()
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.path = self.plot.plot([], [], pen=pg.mkPen(th.SELECTED, width=2, style=Qt.DashLine))
        self.path_points = pg.ScatterPlotItem(size=7, brush=pg.mkBrush(th.SELECTED), pen=None)
        self.points = pg.ScatterPlotItem(size=11, hoverable=True, tip=None)
        self.selected = pg.ScatterPlotItem(size=20, brush=None, pen=pg.mkPen(th.SELECTED, width=2.5))
        self.plot.addItem(self.path_points)
        self.plot.addItem(self.points)
        self.plot.addItem(self.selected)
        self.points.sigClicked.connect(self._on_points_clicked)
        self.labels = [pg.TextItem(anchor=(-0.1, 1.1)) for _ in range(MAX_LABELS)]
        for label in self.labels:
            self.plot.addItem(label)
        self.caption = SteadyLabel()
        self.empty_note = EmptyNote(self.view)
        self.caption.setTextFormat(Qt.PlainText)  # it quotes token text

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.caption)
        self._brush_prompt = pg.mkBrush(th.PROMPT)
        self._brush_generated = pg.mkBrush(th.GENERATED)
        self._point_pen = pg.mkPen("w", width=0.8)
        self._drawn = (np.zeros((0, 2), np.float32), -1)  # the points on screen and the prompt length
        self._n_layer = -1
        self._axis_titles = ("PC 2", "PC 1")

        # another size: other labels fit without overlapping
        self.plot.getViewBox().sigResized.connect(self._on_box_resized)
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_layer)
        state.positionChanged.connect(self._on_state_position)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        """The plot views the window paints, one per event-loop turn after a step."""
        return [self.view]

    # -------------------------------------------------------------- state
    def _on_state_result(self, result) -> None:
        if result.n_layer != self._n_layer:
            self._n_layer = result.n_layer
            self.slider.blockSignals(True)
            self.slider.setRange(0, result.n_layer)
            self.slider.setValue(min(self.depth, result.n_layer))
            self.slider.blockSignals(False)
            self.depth = self.slider.value()
            self._context_basis = None
            self._label_axes()
            self._fit()
        self._draw(autorange=True)

    def _on_box_resized(self, _box) -> None:
        if self.state.result is not None:
            self._draw(autorange=False)

    def _on_part_changed(self, _index: int) -> None:
        self._draw(autorange=True)

    def _on_basis_changed(self, _index: int) -> None:
        self._context_basis = None
        self._label_axes()
        self._draw(autorange=True)

    def _label_axes(self, explained=None) -> None:
        result = self.state.result
        if self.basis.currentText() == CONTEXT_BASIS:
            ex = explained if explained is not None else (0.0, 0.0)
            titles = (f"PC 2 ({ex[1]:.0%})", f"PC 1 ({ex[0]:.0%} of this text's variance)")
        elif result is not None:
            ex = result.explained
            titles = (f"PC 2 ({ex[1]:.0%})", f"PC 1 ({ex[0]:.0%} of embedding variance)")
        else:
            titles = ("PC 2", "PC 1")
        if titles != self._axis_titles:
            self._axis_titles = titles
            th.style_plot(self.plot, self.state.theme, left=titles[0], bottom=titles[1])
            self._fit()

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
        th.style_plot(self.plot, theme, left=self._axis_titles[0], bottom=self._axis_titles[1])
        for label in self.labels:
            label.setFont(theme.font(-1))
        self._label_fm = QFontMetrics(theme.font(-1))
        self.depth_label.setFont(theme.font())
        for box in (self.part, self.basis):
            box.setFont(theme.font())
            box.setMinimumWidth(box.sizeHint().width())  # their words whole, whatever the row's room
        self.slider.setMinimumWidth(4 * theme.text_px())  # and room to slide
        self.caption.setFont(theme.font(-1))
        self._draw(autorange=False)
        self._fit()

    def _fit(self) -> None:
        px = self.state.theme.text_px()
        self._needs = [(self.plot, th.need_area(self.view, self.plot, 10 * px, 5 * px))]

    def plot_needs(self) -> list:
        """(plot, (width, height)): the drawing area each plot needs to be read."""
        return self._needs

    # ------------------------------------------------------------ drawing
    def _set_points(self, xy: np.ndarray, prompt_len: int) -> None:
        """Show ``xy`` (float32 [T, 2]); a step that only appends positions only adds their points."""
        drawn, drawn_prompt_len = self._drawn
        n = len(drawn)
        grew = prompt_len == drawn_prompt_len and len(xy) >= n and np.array_equal(xy[:n], drawn)
        first = n if grew else 0
        new = xy[first:]
        brushes = [self._brush_prompt if i < prompt_len else self._brush_generated for i in range(first, len(xy))]
        if not grew:
            self.points.setData(x=new[:, 0], y=new[:, 1], brush=brushes, pen=self._point_pen, data=np.arange(len(xy)))
        elif len(new):
            self.points.addPoints(x=new[:, 0], y=new[:, 1], brush=brushes, pen=self._point_pen, data=np.arange(first, len(xy)))
        self._drawn = (xy.copy(), prompt_len)

    def _uncrowded(self, candidates, xy: np.ndarray, pieces, view) -> list[int]:
        """Up to MAX_LABELS of ``candidates`` (most wanted first) whose labels do not overlap on screen,
        keep a space apart side by side, and stay inside the plot."""
        (x0, x1), (y0, y1) = view
        box = self.plot.getViewBox().boundingRect()
        sx, sy = max(box.width(), 1) / max(x1 - x0, 1e-9), max(box.height(), 1) / max(y1 - y0, 1e-9)
        fm = self._label_fm
        m = self.labels[0].textItem.document().documentMargin()  # a TextItem's box is its text plus this
        apart = fm.horizontalAdvance(" ") + GAP  # side by side: a space between, or two labels read as one token
        taken: list[tuple[float, float, float, float]] = []
        kept = []
        for i in candidates:
            px, py = (xy[i, 0] - x0) * sx, (y1 - xy[i, 1]) * sy
            w, h = fm.horizontalAdvance(pieces[i] if i < len(pieces) else ""), fm.height()
            # anchor (-0.1, 1.1) of the box (text and margins): the text sits above and right of its point
            left, top = px + 0.1 * (w + 2 * m) + m, py - 1.1 * (h + 2 * m) + m
            right, bottom = left + w + apart, top + h + GAP
            if left < 0 or top < 0 or right - apart > box.width() or bottom - GAP > box.height():
                continue  # it would stick out of the plot: cut text is worse than one label fewer
            if all(right < l or left > r or bottom < t or top > b for l, t, r, b in taken):
                taken.append((left, top, right, bottom))
                kept.append(i)
                if len(kept) == MAX_LABELS:
                    break
        return kept

    def _draw(self, *, autorange: bool) -> None:
        result = self.state.result
        depth = self.depth
        self.depth_label.setText(f"after block {depth - 1}")
        self.depth_what.setCurrentIndex(0 if depth == 0 else 1)
        self.empty_note.setVisible(result is None or result.points.shape[1] == 0)
        if result is None or result.points.shape[1] == 0:
            self._set_points(np.zeros((0, 2), np.float32), 0)
            self.path.setData([], [])
            self.path_points.setData([], [])
            self.selected.setData([], [])
            for label in self.labels:
                label.setVisible(False)
            self.caption.setText("Step once to place the tokens.")
            return
        pts = result.points  # [L + 1, T, 2]
        depth = min(depth, pts.shape[0] - 1)
        part = self.part.currentIndex() if depth == 0 else SUM
        arch = result.info.architecture
        no_table = arch is not None and not arch.position_table  # no position vector is added to the token's row
        if no_table and part == POSITION:  # its position "embeddings" are zeros: never draw them as if they were a vector
            self._set_points(np.zeros((0, 2), np.float32), 0)
            for item in (self.path, self.path_points, self.selected):
                item.setData([], [])
            for label in self.labels:
                label.setVisible(False)
            self.caption.setText(NO_POSITION_SENTENCE)
            return
        parts = result.embed_points  # [2, T, 2]: token, position
        context = self.basis.currentText() == CONTEXT_BASIS
        if context:
            pts, parts, explained = self._context_points(result, depth, parts=part != SUM)
            self._label_axes(explained)
        T = pts.shape[1]
        xy = pts[depth] if part == SUM else parts[part - 1]
        self._set_points(xy, len(result.prompt_ids))
        sel = min(max(self.state.selected_position, 0), T - 1)
        if part == SUM:  # the selected token's path through the blocks
            path = pts[:, sel]  # [L + 1, 2]
        elif part == POSITION:  # the positions in order: neighbours lie near each other
            path = xy
        else:
            path = xy[:0]
        self.path.setData(path[:, 0], path[:, 1])
        if part == SUM:
            self.path_points.setData(x=path[:, 0], y=path[:, 1])
        else:
            self.path_points.setData([], [])
        self.selected.setData(x=[xy[sel, 0]], y=[xy[sel, 1]])
        pieces = result.trace.pieces if result.trace is not None else result.prompt_pieces
        if part == POSITION:  # a position's embedding does not depend on its token: label the position
            pieces = [str(i) for i in range(T)]
        view = self.plot.getViewBox().viewRange()
        if autorange:
            both = np.concatenate([xy, path])
            (x0, y0), (x1, y1) = both.min(axis=0).tolist(), both.max(axis=0).tolist()
            bounds = ((x0, x1), (y0, y1))
            if not _fits(bounds, view):
                # set here, not by pyqtgraph's auto-range, which re-ranges (and repaints) while painting;
                # kept while the points fit, so a step that adds one point does not repaint the axes
                (x0, x1), (y0, y1) = _grown(bounds, view)
                self.plot.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0.12)
                view = self.plot.getViewBox().viewRange()
        candidates = [sel] + [i for i in range(T - 1, max(-1, T - 1 - 4 * MAX_LABELS), -1) if i != sel]
        shown = self._uncrowded(candidates, xy, pieces, view)
        for label, i in zip(self.labels, shown + [None] * MAX_LABELS):
            label.setVisible(i is not None)  # hidden labels cost nothing to paint; empty ones do
            if i is not None:
                label.setText(pieces[i] if i < len(pieces) else "", color=th.SELECTED if i == sel else th.DARK)
                label.setPos(float(xy[i, 0]), float(xy[i, 1]))
        where = "their token + position embeddings (what block 0 reads)" if depth == 0 else f"the residual stream after block {depth - 1}"
        if no_table and depth == 0:
            where = "their token embeddings (what block 0 reads: RoPE adds no position vector)"
        piece = pieces[sel] if sel < len(pieces) else ""
        fitted = (
            f"Axes fitted on these {T} vectors at this depth" if context
            else "Axes fitted once on the model's embedding table (the same for every text)"
        )
        if part == TOKEN:
            text = f"{T} token embeddings alone, without their positions: a repeated token lands on the same point."
        elif part == POSITION:
            text = (f"{T} position embeddings alone, whatever the token (the axes zoom to them); dashed line: "
                    "positions 0, 1, 2, … in order: neighbours lie near each other.")
        else:
            text = f"{T} positions at {where}. Dashed line: position {sel} “{piece}” through all {pts.shape[0] - 1} blocks."
        self.caption.setText(f"{text} {fitted}. Blue = prompt, orange = generated.")

    def _context_points(self, result, depth: int, *, parts: bool) -> tuple[np.ndarray, np.ndarray | None, tuple[float, float]]:
        """float32 [L + 1, T, 2]: every depth's vectors on the two directions that spread this text's
        vectors at ``depth`` most (PCA, fitted here in the window on ``records[*].resid``); float32
        [2, T, 2]: the token and position embeddings on them, centred like the sum (None unless
        ``parts``); and the share of
        their variance each direction explains. Signs follow the previous fit, so the picture does
        not flip from one step to the next."""
        resid = np.concatenate([r.resid for r in result.records], axis=1).astype(np.float64)  # [L + 1, T, d]
        x = resid[depth]
        mean = x.mean(axis=0)
        xc = x - mean
        if len(x) < 3:
            basis = np.eye(x.shape[1], 2)
            variances = np.ones(2)
            total = 2.0
        elif len(x) <= x.shape[1]:  # fewer vectors than dimensions: the small Gram matrix
            w, v = np.linalg.eigh(xc @ xc.T)
            top = np.argsort(w)[::-1][:2]
            basis = xc.T @ v[:, top] / np.sqrt(np.maximum(w[top], 1e-12))
            variances, total = w[top], float(w.sum())
        else:
            w, v = np.linalg.eigh(xc.T @ xc)
            top = np.argsort(w)[::-1][:2]
            basis, variances, total = v[:, top], w[top], float(w.sum())
        if self._context_basis is not None and self._context_basis.shape == basis.shape:
            basis = basis * np.where((basis * self._context_basis).sum(axis=0) < 0, -1.0, 1.0)
        self._context_basis = basis
        points = ((resid - mean) @ basis).astype(np.float32)
        embeds = None
        if parts:
            embeds = np.stack([np.concatenate([getattr(r, name) for r in result.records]) for name in ("token_embed", "pos_embed")])
            embeds = ((embeds.astype(np.float64) - mean) @ basis).astype(np.float32)  # [2, T, 2]
        explained = tuple(float(v / total) if total > 0 else 0.0 for v in variances)
        return points, embeds, explained


def _fits(bounds, view) -> bool:
    """True if the data ``bounds`` lie inside ``view`` and fill at least a third of it along each axis."""
    return all(v0 <= b0 and b1 <= v1 and (b1 - b0) >= (v1 - v0) / 3 for (b0, b1), (v0, v1) in zip(bounds, view))


def _grown(bounds, view):
    """The range to show ``bounds`` that no longer fit ``view``: if they outgrew it, the view as well,
    so that it grows by steps of a quarter or more, not with every new extreme (each change repaints
    the axes); if they are a different picture (another depth, a new prompt), the bounds alone."""
    if all((b1 - b0) >= (v1 - v0) / 3 for (b0, b1), (v0, v1) in zip(bounds, view)):
        return tuple((min(b0, v0), max(b1, v1)) for (b0, b1), (v0, v1) in zip(bounds, view))
    return bounds

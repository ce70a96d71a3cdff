"""Panel 3, attention: one head's pattern (rows = queries, columns = keys) and all heads at a glance.

The selected head's matrix comes from an AttentionHistory that writes only the rows a step added,
and the panel colours only those rows into the RGBA image it shows (colouring the whole matrix again
took 10 ms a step at 1,000 positions). Masked future cells are transparent over a hatched grey
square, so they never look like zero attention. The overview is one RGBA mosaic image of every
layer x head, sampled to a small grid, so it costs one image update per step whatever the model size;
each tile is drawn at least as large as the mode's smallest text (18 px on a projector), so it can be
read and clicked, and the overview scrolls where the column beside the map is too short for every layer.
The colour bar stands beside the map, or under the overview where that column is tall enough, so
that the map takes its width (_place_colorbar).
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetrics
from PySide6.QtWidgets import (
    QCheckBox,
    QGraphicsRectItem,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QFrame,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.window import theme as th
from app.logic.history import AttentionHistory, buffer_size
from app.logic.state import LATEST, AppState
from app.panels.empty_note import EmptyNote
from app.panels.steady_label import SteadyLabel
from app.panels.token_axis import TokenAxis
from app.window.guard import guarded

THUMB = 24  # overview tile size in samples
TURNED_CHARS = 7  # key labels are turned when they may be this long ("␣mat 25"), else written level
GAP = 3
WIDE_HEADS = 12  # the column beside the map is wide enough for this many heads' tiles; more heads scroll sideways
CAPTION_BESIDE = 60  # characters of room beside the controls that put the caption there (two lines of it)
BAR_LINES = 12  # lines of the colour bar's font: its least height under the overview (six numbers, two lines apart)
TALL_VIEW_PX = 450  # the map's view at least this tall (a map about 400 px tall with its axes) before the bar goes under


class ClickableImage(pg.ImageItem):
    """An ImageItem that reports where it was clicked, in image coordinates (x = column, y = row)."""

    clicked = Signal(float, float)

    @guarded
    def mouseClickEvent(self, ev) -> None:
        if ev.button() == Qt.LeftButton:
            pos = ev.pos()
            self.clicked.emit(pos.x(), pos.y())
            ev.accept()


class AttentionPanel(QGroupBox):
    """The selected layer/head's attention matrix with token labels, a 0..1 colour bar, the query
    row marked, and a clickable overview of every layer x head.

    A long prefill keeps a sample of its rows (``engine.trace.StepRecord.attn``): the panel asks the
    engine for the selected head's other rows (``mapRequested``: step, layer, head) and draws them
    when they come (``show_map``)."""

    mapRequested = Signal(int, int, int)  # step, layer, head

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("3 · Attention: where each position looks", parent)
        self.short_title = "3 Attention"
        self.state = state
        self.history = AttentionHistory()
        self._pieces: tuple[str, ...] = ()
        self._length = 0
        self._records = None  # the history's records (the last result's)
        self._can_ask = False  # the engine holds the model that can recompute a head's rows
        self._asked: tuple | None = None  # (pass attn array, layer, head) asked for last

        self.layer_spin, self.head_spin = QSpinBox(), QSpinBox()
        self.layer_spin.valueChanged.connect(state.set_layer)
        self.head_spin.valueChanged.connect(state.set_head)
        self.caption = SteadyLabel()
        self.caption.setTextFormat(Qt.PlainText)  # it quotes token text
        controls = self._controls = QHBoxLayout()
        controls.addWidget(QLabel("Layer"))
        controls.addWidget(self.layer_spin)
        controls.addWidget(QLabel("Head"))
        controls.addWidget(self.head_spin)
        controls.addStretch(1)  # where the caption goes when the panel is wide (_place_caption)
        self.stretch = QCheckBox("√ colours")
        self.stretch.setToolTip(
            "Colour by the square root of each weight, so that small weights (0.01 to 0.1), common in "
            "long texts, show; the colour bar's numbers stay the real weights"
        )
        self.stretch.toggled.connect(self._on_stretch_toggled)
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Show the whole matrix again (zoom with the mouse wheel, drag to move)")
        self.fit_button.clicked.connect(self._on_fit_clicked)
        controls.addWidget(self.stretch)
        controls.addWidget(self.fit_button)
        self._gamma = 1.0  # weights are coloured as weight ** gamma
        self._zoomed = False  # the person zoomed or moved the matrix: steps keep their view

        # ---- main matrix
        self.view = pg.GraphicsLayoutWidget()
        self.view.ci.layout.setContentsMargins(9, 9, 9, 0)  # the key axis's title has its own margin below
        self.rows_axis, self.keys_axis = TokenAxis("left"), TokenAxis("bottom")
        self.rows_right = TokenAxis("right")  # every second row's name when they are too close for one side
        self.rows_right.lane = 1
        self.plot: pg.PlotItem = self.view.addPlot(
            axisItems={"left": self.rows_axis, "bottom": self.keys_axis, "right": self.rows_right})
        self.plot.hideAxis("right")
        self.view.installEventFilter(self)  # a new size: the key labels take their share of it
        th.fix_plot(self.plot).invertY(True)
        self.plot.setMouseEnabled(True, True)  # long texts: zoom (wheel) and move (drag) to a region
        self.plot.getViewBox().sigRangeChangedManually.connect(self._on_matrix_range_changed_manually)
        self.plot.getViewBox().setDefaultPadding(0.0)
        self.masked = QGraphicsRectItem()
        self.masked.setBrush(QBrush(QColor(th.MASKED), Qt.BDiagPattern))
        self.masked.setPen(pg.mkPen(None))
        self.masked_fill = QGraphicsRectItem()
        self.masked_fill.setBrush(QBrush(QColor("#EFEFEF")))
        self.masked_fill.setPen(pg.mkPen(None))
        self.plot.addItem(self.masked_fill)
        self.plot.addItem(self.masked)
        self.image = ClickableImage()
        self.image.clicked.connect(self._on_image_clicked)
        self.plot.addItem(self.image)
        self._rgba = np.zeros((0, 0, 4), np.uint8)  # the image: the coloured matrix, grown in powers of two
        self._rgba_of: tuple[int, int] | None = None  # the layer and head it holds
        self.shown = np.zeros((0, 0), np.float32)  # the attention weights the image shows
        # the colour bar explains the colours; the image is coloured here, not by the bar's levels
        self.colorbar = pg.ColorBarItem(values=(0, 1), limits=(0, 1), interactive=False, width=14)
        self.plot.layout.addItem(self.colorbar, 2, 5)  # right of the plot, where insert_in puts it
        self.plot.layout.setColumnFixedWidth(4, 5)
        self.bar_view = pg.GraphicsLayoutWidget()  # the colour bar under the overview, when the panel is tall
        # it asks for no room: it is shown only where the side has room for it (_place_colorbar), and
        # the panel's minimum must not depend on where the bar is (the pages are planned on it)
        self.bar_view.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Ignored)
        self.bar_view.hide()

        # ---- overview
        self.overview_view = pg.GraphicsLayoutWidget()
        self.overview: pg.PlotItem = self.overview_view.addPlot()
        th.fix_plot(self.overview).invertY(True)
        self.overview.showAxis("top")  # the heads' numbers above the tiles, under the caption: the layers scroll below
        self.overview.hideAxis("bottom")
        for name in ("left", "top"):
            self.overview.getAxis(name).showLabel(False)  # no titles: the caption names rows and columns
        self.overview.getViewBox().setDefaultPadding(0.0)  # tiles fill the box: usable at 12 x 12
        self.mosaic = ClickableImage()
        self.mosaic.clicked.connect(self._on_mosaic_clicked)
        self.overview.addItem(self.mosaic)
        self.tile_marker = QGraphicsRectItem()
        self.tile_marker.setBrush(QBrush(Qt.NoBrush))
        self.overview.addItem(self.tile_marker)
        self._mosaic_rgba = np.zeros((0, 0, 4), np.uint8)
        self._lut = np.zeros((256, 4), np.uint8)
        self.overview_caption = QLabel("All heads (click one)")
        self.overview_caption.setWordWrap(True)
        self.overview_caption.setToolTip("Every head's pattern: a row per layer (numbered on the left), a column per head "
                                         "(numbered above); the layers scroll. Click one to show it large.")
        self.overview_scroll = QScrollArea()  # every tile at least a line of text tall: the layers scroll
        self.overview_scroll.setFrameShape(QFrame.NoFrame)
        self.overview_scroll.setWidgetResizable(True)  # the tiles grow where there is room
        self.overview_scroll.setWidget(self.overview_view)

        self.side = QWidget()  # the overview beside the matrix: the panel fits a 1024 x 720 projector
        side = QVBoxLayout(self.side)
        side.setContentsMargins(0, 0, 0, 0)
        side.addWidget(self.overview_caption)
        side.addWidget(self.overview_scroll, 1)
        side.addWidget(self.bar_view, 1)
        plots = QHBoxLayout()
        plots.addWidget(self.view, 5)
        plots.addWidget(self.side, 1)
        self.empty_notes = [EmptyNote(self.view), EmptyNote(self.overview_view, "")]
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.caption)  # its own row unless the panel is wide: see _place_caption
        layout.addLayout(plots, 1)

        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.positionChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    def set_alone(self, alone: bool) -> None:
        """Shown alone (focused): the map takes the panel's whole width, so that a 32-position map
        names every row (from both sides) and every key on a 1280 x 720 projector; the overview of
        every head hides meanwhile (the Layer and Head boxes still choose one)."""
        self.side.setVisible(not alone)
        self._place_colorbar(self.view.height())

    def _place_colorbar(self, height: int) -> None:
        """The colour bar beside the map, or under the overview when the map's view is ``height`` px
        tall and the overview beside it keeps its need with BAR_LINES lines to spare: the map then
        takes the bar's width, so that a 32-position map at least 400 px tall names every key
        (2560 x 1440). The bar explains the overview's colours as well as the map's."""
        line = QFontMetrics(self.state.theme.font(-1)).height()
        room = height - self.overview_scroll.minimumHeight() - self.overview_caption.sizeHint().height()
        under = not self.side.isHidden() and room >= BAR_LINES * line and height >= TALL_VIEW_PX
        if under == (self.colorbar.scene() is self.bar_view.scene()):
            return
        if under:
            self.plot.layout.removeItem(self.colorbar)
            self.colorbar.scene().removeItem(self.colorbar)  # out of the map's scene before the other's
            self.bar_view.ci.addItem(self.colorbar)
        else:
            self.bar_view.ci.removeItem(self.colorbar)  # out of its layout and scene
            self.plot.layout.addItem(self.colorbar, 2, 5)
        self.plot.layout.setColumnFixedWidth(4, 0 if under else 5)
        self.bar_view.setVisible(under)

    def plot_needs(self) -> list:
        """(plot, (width, height)): the drawing area each plot needs to be read."""
        return self._needs

    def plot_views(self) -> list[pg.GraphicsView]:
        """The plot views the window paints, one per event-loop turn after a step."""
        return [self.view, self.overview_view]

    # -------------------------------------------------------------- state
    def _on_state_result(self, result) -> None:
        L, H = result.n_layer, result.n_head
        for spin, count in ((self.layer_spin, L), (self.head_spin, H)):
            if spin.maximum() != count - 1:
                spin.blockSignals(True)
                spin.setRange(0, count - 1)
                spin.blockSignals(False)
        self._sync_spins()  # the boxes name what is drawn: another model may have narrowed the selection
        shape = self.history.shape
        self.history.sync(result.records)
        if self.history.shape != shape:
            self._size_overview()  # another model: other tiles to make room for
        self._records, self._can_ask = result.records, result.can_step
        self._ask_for_rows(result.records)
        self._pieces = result.trace.pieces if result.trace is not None else result.prompt_pieces
        self._draw_matrix(ticks=self.history.length != self._length)
        self._length = self.history.length
        self._draw_overview()

    def _ask_for_rows(self, records) -> None:
        """Ask the engine for the selected head's rows a sampled pass did not keep (once per pass and head)."""
        step = self.history.missing(self.state.layer, self.state.head)
        if step is None or not self._can_ask:
            return
        wanted = (records[step].attn, self.state.layer, self.state.head)
        if self._asked is None or self._asked[0] is not wanted[0] or self._asked[1:] != wanted[1:]:
            self._asked = wanted
            self.mapRequested.emit(step, self.state.layer, self.state.head)

    def awaiting(self) -> bool:
        """Whether the selected head's rows have been asked for and not come yet."""
        return self._asked is not None and self._can_ask and self.history.missing(self.state.layer, self.state.head) is not None

    def show_map(self, answer) -> None:
        """The engine's rows of one head (``app.protocol.messages.MapResult``): drawn if that pass is still shown."""
        if self.history.add_map(answer.record, answer.layer, answer.head, answer.rows):
            self._draw_matrix(ticks=True)

    def _on_state_selection(self, _value: int) -> None:
        if self._records is not None:
            self._ask_for_rows(self._records)
        self._sync_spins()
        self._draw_matrix(ticks=True)  # the marked row and the key it looks at most are always named
        self._draw_overview_marker()

    def _sync_spins(self) -> None:
        for spin, value in ((self.layer_spin, self.state.layer), (self.head_spin, self.state.head)):
            if spin.value() != value:
                spin.blockSignals(True)
                spin.setValue(value)
                spin.blockSignals(False)

    def _on_state_theme(self, theme: th.Theme) -> None:
        th.style_plot(self.plot, theme, left="query position", bottom="key position")
        th.style_plot(self.overview, theme)  # the caption says what the rows and columns are: the titles scrolled away
        th.fix_axis_width(self.plot, theme, 15)  # "▶ token pie 1023": the mark, 8 characters, a space, the position
        th.fix_axis_width(self.plot, theme, 10, name="right")  # no title on this side
        self.keys_axis.title_beside = False  # under the labels while the views' needs are measured
        self.keys_axis.set_extent(QFontMetrics(theme.font(-1)).height())  # the least: one line (_label_room)
        self.rows_axis.lanes = self.rows_right.lanes = 1  # the least: rows named from one side
        self.plot.hideAxis("right")
        self.colorbar.setColorMap(theme.cmap())
        self._label_colorbar()
        self.colorbar.axis.setTickFont(theme.font(-1))
        self.colorbar.axis.setLabel("attention weight", color=theme.text, **{"font-size": theme.css_size(-1)})
        # ticks, then the title's line: pyqtgraph's own width left the title over the numbers
        ticks = QFontMetrics(theme.font(-1)).horizontalAdvance("0.25")
        self.colorbar.axis.setWidth(ticks + theme.text_px(-1) + 14)
        # under the overview, its first and last numbers stand half a line past the bar's ends: that
        # room above and below (9 px cut the "0" of the largest text size's 26 px lines by 3 px)
        ends = max(9, theme.text_px(-1) // 2 + 2)
        self.bar_view.ci.layout.setContentsMargins(0, ends, 0, ends)
        self._lut = (theme.cmap().getLookupTable(0.0, 1.0, 256, alpha=True)).astype(np.uint8)
        self._rgba_of = None  # new colours: colour every row again
        self.tile_marker.setPen(theme.pen(th.SELECTED, width=theme.line + 1))
        self.caption.setFont(theme.font())
        px = theme.text_px()
        bar = self._bar_width = 14 + QFontMetrics(theme.font(-1)).horizontalAdvance("0.25") + theme.text_px(-1) + 14 + 16  # the colour bar
        self._needs = [(self.plot, th.need_area(self.view, self.plot, 6 * px, 6 * px, beside=bar))]
        self._size_overview()
        # turned key labels leave the corner under the rows' labels empty: their title goes there
        self.keys_axis.title_beside = self.keys_axis.label.boundingRect().width() + 4 <= self.rows_axis.fixedWidth
        self._place_colorbar(self.view.height())  # other fonts: other room under the overview
        self._fit_labels(self.view.width(), self.view.height())
        self._draw_matrix(ticks=True)
        self._draw_overview()

    def tile_px(self) -> int:
        """The least size of one head's tile, in pixels: in projector mode the mode's smallest text (18 px),
        else three quarters of it (8 px: the column beside a 1024 x 768 map keeps its width)."""
        theme = self.state.theme
        return theme.min_px if th.is_projector(theme) else round(0.75 * theme.min_px)

    def _size_overview(self) -> None:
        """Make every tile of the overview at least ``tile_px`` square: the overview's view asks for
        that, and its scroll area for the room of every head (up to WIDE_HEADS, sideways beyond) and
        of a few layers (the others scroll)."""
        L, H = self.history.shape
        px = self.state.theme.text_px()
        scale = self.tile_px() / THUMB  # pixels per sample of a tile
        self._mosaic_rgba = np.zeros((0, 0, 4), np.uint8)  # drawn and labelled anew at the next step
        if L and H:
            need = (math.ceil((H * (THUMB + GAP) + GAP) * scale) + 1, math.ceil((L * (THUMB + GAP) + GAP) * scale) + 1)
        else:
            need = (4 * px, 4 * px)
        th.fix_axis_width(self.overview, self.state.theme, len(str(max(L - 1, 0))))  # the layers' numbers: an axis that never widens
        need = th.need_area(self.overview_view, self.overview, *need)
        self._needs = [*self._needs[:1], (self.overview, need)]
        bars = self.overview_scroll.style().pixelMetric(QStyle.PM_ScrollBarExtent) + 2
        wide = self.overview_view.minimumWidth()
        if H > WIDE_HEADS:  # more heads than the column has room for: they scroll sideways
            wide -= math.floor((H - WIDE_HEADS) * (THUMB + GAP) * scale)
        few = self.overview_view.minimumHeight() - need[1] + min(need[1], 4 * px)  # four lines of tiles, the others scroll
        self.overview_scroll.setMinimumSize(wide + (bars if need[1] > 4 * px else 0), few + (bars if H > WIDE_HEADS else 0))

    def _on_stretch_toggled(self, on: bool) -> None:
        self._gamma = 0.5 if on else 1.0
        self._rgba_of = None  # colour every row again
        self._label_colorbar()
        self._draw_matrix(ticks=False)
        self._draw_overview()

    def _label_colorbar(self) -> None:
        """The colour bar's numbers are the real weights, wherever ``_gamma`` puts their colours."""
        values = (0, 0.01, 0.05, 0.1, 0.25, 0.5, 1) if self._gamma != 1 else (0, 0.2, 0.4, 0.6, 0.8, 1)
        self.colorbar.axis.setTicks([[(v ** self._gamma, f"{v:g}") for v in values]])

    def _on_fit_clicked(self) -> None:
        self._zoomed = False
        T = self.history.length
        if T:
            self.plot.setRange(xRange=(0, T), yRange=(0, T), padding=0)
            self._set_ticks(T)

    def _on_matrix_range_changed_manually(self, _mask) -> None:
        self._zoomed = True  # the axes name the cells of the region in view as they draw

    def _on_image_clicked(self, _x: float, y: float) -> None:
        row = int(y)
        if 0 <= row < self.history.length:
            self.state.set_position(LATEST if row == self.history.length - 1 else row)

    def _on_mosaic_clicked(self, x: float, y: float) -> None:
        L, H = self.history.shape
        layer, head = int(y // (THUMB + GAP)), int(x // (THUMB + GAP))
        if 0 <= layer < L and 0 <= head < H:
            self.state.set_layer(layer)
            self.state.set_head(head)

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_caption()

    def _place_caption(self) -> None:
        """The caption beside the controls when the panel is wide enough to give it CAPTION_BESIDE
        characters there (focused: the map gets the caption's row), else on a row of its own (beside
        the spin boxes of a narrow panel it wrapped to 7 lines on a projector)."""
        controls = self._controls
        fixed = [controls.itemAt(i) for i in range(controls.count()) if controls.itemAt(i).widget() is not self.caption]
        used = sum(item.sizeHint().width() for item in fixed) + controls.spacing() * len(fixed)
        room = self.contentsRect().width() - self.layout().contentsMargins().left() - self.layout().contentsMargins().right() - used
        beside = room >= CAPTION_BESIDE * QFontMetrics(self.caption.font()).averageCharWidth()
        if beside == (controls.indexOf(self.caption) >= 0):
            return
        if beside:
            self.layout().removeWidget(self.caption)
            controls.insertWidget(4, self.caption, 1)  # after Layer and Head; the stretch after it gives way
            controls.setStretch(5, 0)
        else:
            controls.removeWidget(self.caption)
            controls.setStretch(4, 1)
            self.layout().insertWidget(1, self.caption)
        self.caption.start_over()  # the lines it held beside the controls are not the ones it needs here

    # ------------------------------------------------------------ drawing
    def _draw_matrix(self, *, ticks: bool) -> None:
        T = self.history.length
        for note in self.empty_notes:
            note.setVisible(T == 0)
        if T == 0:
            self.image.clear()
            self.shown = np.zeros((0, 0), np.float32)
            self.masked.setRect(QRectF())
            self.masked_fill.setRect(QRectF())
            self.caption.setText("Run the prefill (Step) to see attention.")
            return
        layer, head = self.state.layer, self.state.head
        self.shown = self.history.matrix(layer, head)
        self.image.setImage(self._colored(layer, head), autoLevels=False)
        self.masked_fill.setRect(QRectF(0, 0, T, T))
        self.masked.setRect(QRectF(0, 0, T, T))
        row = self.state.selected_position
        row = min(max(row, 0), T - 1)
        self.plot.getViewBox().setLimits(xMin=0, xMax=T, yMin=0, yMax=T, minXRange=min(T, 4), minYRange=min(T, 4))
        if not self._zoomed:
            self.plot.setRange(xRange=(0, T), yRange=(0, T), padding=0)
        piece = self._pieces[row] if row < len(self._pieces) else ""
        newest = " (the newest, predicting the next token)" if row == T - 1 else ""
        waiting = self.history.missing(layer, head) is not None
        rest = (" Only sampled rows of the prompt are kept; the engine is computing this head's others." if self._can_ask
                else " Only sampled rows of the prompt were saved; open the model to see the others.") if waiting else ""
        self.caption.setText(
            f"Layer {layer}, head {head}: row {row} “{piece}”{newest} is marked ▶; "
            f"hatched cells: masked future positions.{rest}"
        )
        if ticks:
            self._set_ticks(T)

    def _colored(self, layer: int, head: int) -> np.ndarray:
        """uint8 [T, T, 4]: ``shown`` in colour, recolouring only the rows the history just wrote."""
        T = self.history.length
        first = self.history.fresh_from if self._rgba_of == (layer, head) else 0
        if self._rgba.shape[0] < T:
            size = buffer_size(T)
            grown = np.zeros((size, size, 4), np.uint8)  # transparent: a row's future cells stay so
            grown[: first, : first] = self._rgba[: first, : first]
            self._rgba = grown
        self._rgba[first:T, :T] = rgba(self.shown[first:] ** self._gamma, self._lut, masked=(0, 0, 0, 0))
        self._rgba_of = (layer, head)
        return self._rgba[:T, :T]

    def _set_ticks(self, T: int) -> None:
        """Name rows and columns by token: the newest row, the selected row (▶) and the key it looks at
        most always; every other one where it fits (the axes choose, at the size they have)."""
        pieces = self._pieces[:T]
        row = min(max(self.state.selected_position, 0), T - 1)
        weights = self.shown[row] if row < len(self.shown) else np.zeros(0)
        strongest = [int(np.nanargmax(weights))] if weights.size and np.isfinite(weights).any() else []
        self._fit_labels(self.view.width(), self.view.height())  # a longer text: its rows first
        self.rows_axis.set_cells(pieces, always=[T - 1, row], marked=row)
        self.rows_right.set_cells(pieces, marked=row)
        self.keys_axis.set_cells(pieces, always=strongest)

    def _label_room(self, width: int, height: int) -> tuple[int, int]:
        """(how long a turned key label may be, 1 or 2 sides naming rows) in a matrix view ``width`` x
        ``height`` px: the rows first, a line each, from one side when that names every row, else a
        line per two rows (from both sides if the map stays wide enough to name every key: every row
        named, else every second); the key labels take the rest of the height, else a quarter of it; a 10-character piece and its position (or the longest label) at most. Under
        TURNED_CHARS characters, one line: the key labels are written level."""
        metrics = QFontMetrics(self.state.theme.font(-1))
        line, most = metrics.height(), metrics.horizontalAdvance("x" * 10 + " 999")
        if self.history.length <= 256:  # no longer than the longest label: the rest goes to the map
            most = min(most, max((metrics.horizontalAdvance(f"{piece} {i}") for i, piece in
                                  enumerate(self._pieces[: self.history.length])), default=0) + 2)
        turned = min(metrics.horizontalAdvance("x" * TURNED_CHARS), most)
        need_w, need_h = self._needs[0][1]
        # the drawing area and the key labels share what the view has beyond its minimum, and the
        # title's line when turned labels leave it room beside them
        title = int(self.keys_axis.label.boundingRect().height()) - 1 if self.keys_axis.title_beside else 0
        shared = height - self.view.minimumHeight() + need_h + line + title
        wide = width - self.view.minimumWidth() + need_w  # the drawing area's width, one side naming rows
        if self.colorbar.scene() is self.bar_view.scene():
            wide += self._bar_width  # the view's minimum counts the bar, which is under the overview now
        rows = self.history.length * (line + 1)  # + 1: the drawing area is a pixel short of its share
        lanes = 1
        if shared - rows >= turned:  # every row named from one side, the keys take the rest
            extent = shared - rows
        elif shared - rows // 2 >= turned:  # a label per two rows: from both sides if every key stays named
            extent = shared - rows // 2
            lanes = 2 if wide - self.rows_right.fixedWidth > self.history.length * line else 1
        else:  # rows named in part: a quarter of the height for the keys
            extent = shared // 4
        extent = min(most, extent, shared - need_h)  # the drawing area keeps its need
        return (extent if extent >= turned and extent > line + 1 else line), lanes

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        """The matrix's view resized (focus, a window size): the labels take their share."""
        if watched is self.view and event.type() == QEvent.Type.Resize:
            self._place_colorbar(event.size().height())
            self._fit_labels(event.size().width(), event.size().height())
        return False

    def _fit_labels(self, width: int, height: int) -> None:
        extent, lanes = self._label_room(width, height)
        if extent != self.keys_axis.extent:
            self.keys_axis.set_extent(extent)
        if lanes != self.rows_axis.lanes:
            self.rows_axis.lanes = self.rows_right.lanes = lanes
            self.plot.showAxis("right", lanes == 2)
            self.rows_axis.picture = None
            self.rows_axis.update()

    def _draw_overview(self) -> None:
        L, H = self.history.shape
        if self.history.length == 0 or L == 0:
            self.mosaic.clear()
            self.tile_marker.setRect(QRectF())
            return
        tiles = self.history.thumbnails(THUMB).transpose(0, 2, 1, 3)  # [L, t, H, t]: mosaic order
        cell = THUMB + GAP
        if self._mosaic_rgba.shape[:2] != (L * cell, H * cell):
            self._mosaic_rgba = np.zeros((L * cell, H * cell, 4), np.uint8)  # gaps stay transparent
            line = QFontMetrics(self.state.theme.font(-1)).height() / (self.tile_px() * cell / THUMB)  # rows a label takes
            self.overview.getAxis("left").setTicks(_tick_levels(_nice_step(line), L, str, offset=THUMB / 2, scale=cell))
            self.overview.getAxis("top").setTicks(_tick_levels(_nice_step(H / 12), H, str, offset=THUMB / 2, scale=cell))
            self.overview.setRange(xRange=(-GAP, H * cell), yRange=(-GAP, L * cell), padding=0)  # room for the marker
        self._mosaic_rgba.reshape(L, cell, H, cell, 4)[:, :THUMB, :, :THUMB] = rgba(tiles ** self._gamma, self._lut, masked=(200, 200, 200, 255))
        self.mosaic.setImage(self._mosaic_rgba, autoLevels=False)
        self._draw_overview_marker()

    def _draw_overview_marker(self) -> None:
        cell = THUMB + GAP
        if self.history.length:
            tile = QRectF(self.state.head * cell - 1.5, self.state.layer * cell - 1.5, THUMB + 3, THUMB + 3)
            self.tile_marker.setRect(tile)
            box = self.overview_view.mapFromScene(self.overview.getViewBox().mapViewToScene(tile)).boundingRect()
            self.overview_scroll.ensureVisible(box.center().x(), box.center().y(), box.width() // 2 + 4, box.height() // 2 + 4)

    def tile_boxes(self) -> dict[tuple[int, int], QRectF]:
        """(layer, head): the box each head's tile is drawn in, in the overview view's pixels."""
        L, H = self.history.shape if self.history.length else (0, 0)
        box = self.overview.getViewBox()
        cell = THUMB + GAP
        return {(layer, head): self.overview_view.mapFromScene(box.mapViewToScene(QRectF(head * cell, layer * cell, THUMB, THUMB))).boundingRect().toRectF()
                for layer in range(L) for head in range(H)}


def rgba(weights: np.ndarray, lut: np.ndarray, *, masked: tuple[int, int, int, int]) -> np.ndarray:
    """uint8 [..., 4]: attention ``weights`` (0 to 1) coloured through ``lut`` (uint8 [256, 4]), the
    masked (NaN) cells in the colour ``masked``."""
    index = np.clip(np.nan_to_num(weights * 255), 0, 255).astype(np.uint8)
    out = lut[index]
    out[np.isnan(weights)] = masked
    return out


def _nice_step(step: float) -> int:
    """The smallest power of two >= ``step`` (at least 1): ticks every 1, 2, 4, 8... positions."""
    return 1 << max(0, math.ceil(math.log2(max(step, 1))))


def _tick_levels(step: int, count: int, text, *, offset: float = 0.5, scale: float = 1.0, finest: int = 1,
                 always=()) -> list:
    """pyqtgraph tick levels for ``count`` labelled cells: every ``step``-th cell first, then the ones
    between at finer levels down to every ``finest``-th; pyqtgraph labels a finer level only while its
    text still fits, so labels never overlap into mush. The cells in ``always`` are labelled in the
    first level, and the every-``step``-th labels too near them left out."""
    must = sorted({i for i in always if 0 <= i < count})
    first = [i for i in range(0, count, step) if all(abs(i - m) >= step for m in must)] + must
    levels, shown = [[(i * scale + offset, text(i)) for i in sorted(first)]], set(first) | set(range(0, count, step))
    if step <= finest:
        return levels
    step //= 2
    while True:
        level = [(i * scale + offset, text(i)) for i in range(0, count, step) if i not in shown]
        shown.update(range(0, count, step))
        levels.append(level)
        if step <= finest:
            return levels
        step //= 2

"""Inside, part 5: the logit lens (the final norm and the LM head applied to the residual stream at
every depth: what the model would predict if it stopped there) and the residual stream's length
through every block, with what each block's attention and MLP add.

The lens table drops its lowest candidates' columns when the view is too narrow for all of them (a
token is always shown whole: one cut reads as another word), so its last column (the next token's model p and rank) is never cut off; the stream chart
names its blocks by number, every n-th one as the width allows (``inside_plots.spaced_ticks``).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGroupBox, QHeaderView, QTableWidget, QTableWidgetItem

from app.logic.wording import percent
from app.window import theme as th
from app.window.guard import guarded
from app.panels.inside_plots import fit_rows, label, part_box, spaced_ticks

LENS_SHOWN = 5  # lens candidates per depth in the table, at most
FITS = (5, 4, 3, 2, 1)  # candidates shown, tried in turn, each token whole
PAGED_ROWS = 6  # rows a paged lens table shows at least (it scrolls the rest itself)
STREAM_H = 210  # pixels of the stream chart's plot


class LensTable(QTableWidget):
    """The logit lens, one row per depth: when the table is too narrow for every column, its lowest
    candidates' columns leave (``FITS``), the tokens never cut; the first column
    (the depth) and the last (the next token's model p and rank) always stay whole."""

    def __init__(self):
        super().__init__()
        self.setEditTriggers(QTableWidget.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.paged = False
        self.fit = FITS[0]  # candidates shown
        self._rows: tuple | None = None  # (pieces [rows][K], logits [rows, K]) of the lens drawn
        self._room = -1  # the width the columns were fitted to

    def set_candidates(self, pieces: list[list[str]], logits: np.ndarray) -> None:
        """Each depth's candidates, best first (their cells are written by ``fit_columns``)."""
        self._rows = (pieces, logits)
        self.refit()

    def refit(self) -> None:
        """Fit the columns again (new rows, or a new font: the same width holds other columns)."""
        self._room = -1
        self.fit_columns()

    def fit_columns(self) -> None:
        """The most candidates that fit the width (``FITS``, in order)."""
        room = self.viewport().width()
        if self._rows is None or room == self._room:
            return
        self._room = room
        for fit in FITS:
            self._write(fit)
            self.horizontalHeader().resizeSections(QHeaderView.ResizeToContents)  # now, not at the next layout pass
            if self.horizontalHeader().length() <= room:
                return

    def _write(self, shown: int) -> None:
        self.fit = shown
        pieces, logits = self._rows
        for row in range(len(pieces)):
            for col in range(LENS_SHOWN):
                self.setItem(row, col + 1, QTableWidgetItem(f"{pieces[row][col]} ({float(logits[row, col]):.1f})"))
        for col in range(LENS_SHOWN):
            self.setColumnHidden(col + 1, col >= shown)

    def set_paged(self, paged: bool) -> None:
        """On a page of its own the table scrolls its rows (the header stays in view); on the one
        long page it is as tall as its rows."""
        self.paged = paged
        if paged:
            self.setMinimumHeight(self.horizontalHeader().height() + PAGED_ROWS * max(1, self.rowHeight(0)) + 4)
            self.setMaximumHeight(16_777_215)
        else:
            fit_rows(self)

    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.fit_columns()


class LensPart:
    """The logit lens at every depth and the residual stream through every block."""

    def __init__(self):
        self.text = label()
        self.table = LensTable()
        self.stream_text = label()
        self.stream_view = th.plot_widget()
        self.stream_view.setFixedHeight(STREAM_H)
        sp = self.stream_view.getPlotItem()
        th.fix_plot(sp)
        sp.addLegend(offset=(8, 4))  # top left, above the bars (the y range leaves room for it)
        sp.showGrid(y=True, alpha=0.25)
        self.attn_norm_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.BLUE, name="attention adds (length)")
        self.mlp_norm_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.ORANGE, name="MLP adds (length)")
        sp.addItem(self.attn_norm_bars)
        sp.addItem(self.mlp_norm_bars)
        self.resid_line = sp.plot([], [], pen=pg.mkPen(th.DARK, width=2), symbol="o", symbolSize=6, name="residual stream length")
        self.n_layer = 0
        sp.vb.sigResized.connect(self._on_stream_resized)
        self.box: QGroupBox = part_box("11 · Logit lens", [self.text, self.table])
        self.stream_box: QGroupBox = part_box("12 · The residual stream", [self.stream_text, self.stream_view])  # a part of its own

    def restyle(self, theme: th.Theme) -> None:
        """The stream chart's axis title and its room in ``theme``'s font."""
        th.style_plot(self.stream_view.getPlotItem(), theme, bottom="block")
        th.fix_axis_width(self.stream_view.getPlotItem(), theme, 5)
        self.stream_view.setFixedHeight(STREAM_H + theme.text_px())
        self.table.refit()
        self._tick()

    def set_paged(self, paged: bool) -> None:
        self.table.set_paged(paged)

    def draw(self, t, says, piece) -> None:
        """Draw InsideTrace ``t``'s lens and stream; ``piece(id)`` gives a token's readable text."""
        self._draw_lens(t, says, piece)
        self._draw_stream(t, says)

    def _draw_lens(self, t, says, piece) -> None:
        depths = ["embedding"] + [f"block {i}" for i in range(t.n_layer)]
        table = self.table
        table.setRowCount(len(depths))
        table.setColumnCount(LENS_SHOWN + 2)
        table.setHorizontalHeaderLabels(
            ["after"] + [f"#{i + 1} (logit)" for i in range(LENS_SHOWN)] + [f"“{piece(t.next_id)}”:\nmodel p, rank"]
        )
        for row, name in enumerate(depths):
            table.setItem(row, 0, QTableWidgetItem(name))
            table.setItem(row, LENS_SHOWN + 1, QTableWidgetItem(f"{percent(float(t.lens_next_prob[row]))}, {int(t.lens_next_rank[row]):,}"))
        table.set_candidates([[piece(int(i)) for i in ids[:LENS_SHOWN]] for ids in t.lens_ids], t.lens_logits)
        table.resizeRowsToContents()
        table.set_paged(table.paged)
        decided = next((row for row in range(len(depths)) if int(t.lens_next_rank[row]) == 1), None)
        where = "never ranks first" if decided is None else f"ranks first from “{depths[decided]}” on"
        self.text.setText(says("lens", next=piece(t.next_id), where=where, ms=t.lens_ms))

    def _draw_stream(self, t, says) -> None:
        layers = np.arange(t.n_layer)
        attn = np.linalg.norm(t.attn_out, axis=-1)
        mlp = np.linalg.norm(t.mlp_out, axis=-1)
        resid = np.linalg.norm(t.resid, axis=-1)
        self.attn_norm_bars.setOpts(x=layers - 0.2, height=attn, width=0.38)
        self.mlp_norm_bars.setOpts(x=layers + 0.2, height=mlp, width=0.38)
        self.resid_line.setData(np.arange(t.n_layer + 1) - 0.5, resid)
        r = t.resid.astype(np.float64)
        cos = (r[:-1] * r[1:]).sum(-1) / np.maximum(np.linalg.norm(r[:-1], axis=-1) * np.linalg.norm(r[1:], axis=-1), 1e-12)
        turn = np.degrees(np.arccos(np.clip(cos, -1, 1)))
        top = float(max(resid.max(), attn.max(), mlp.max()))
        self.stream_view.getPlotItem().setRange(xRange=(-0.8, t.n_layer - 0.2), yRange=(0, top * 1.45), padding=0)  # room for the legend
        self.n_layer = t.n_layer
        self._tick()
        self.stream_text.setText(says("stream", turns=", ".join(f"{a:.0f}°" for a in turn), last=t.n_layer - 1))

    def _tick(self) -> None:
        """Every n-th block's number under the bars, n as the width allows."""
        plot = self.stream_view.getPlotItem()
        spaced_ticks(plot.getAxis("bottom"), [str(i) for i in range(self.n_layer)], range(self.n_layer), plot)

    def _on_stream_resized(self, *_args) -> None:
        self._tick()

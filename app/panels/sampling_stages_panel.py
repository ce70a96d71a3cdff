"""Sampling, stage by stage: the same candidates through every stage, in the order applied, and the draw.

For the step on screen: (1) raw logits, (2) the repetition penalty (which tokens were in the
context, old and new value), (3) ÷ temperature (or greedy, said plainly), (4) top-k, (5) softmax,
(6) top-p with its cumulative line, (7) the renormalised probabilities, (8) the draw: u from the
seeded generator, the candidates laid end to end in the draw order, where u fell and the token it
selected. Every number comes from the step's ``Distribution`` (``engine.sampling``), recomputed by
the engine whenever a setting changes; the rest of the vocabulary is summarised so the bars add up.
"""

from __future__ import annotations

from html import escape
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from engine.defaults import DEFAULT_SETTINGS, model_settings

from app.window import theme as th
from app.window.guard import guarded
from app.logic.state import AppState

PINNED = 3  # the top rows kept in view above the chosen row when it is further down
SHOWN = 12  # candidates in the table (the top by penalised logit, as the candidates panel orders them)
PENALISED = "#FCE5C0"  # pale orange: the penalty changed this logit
REMOVED = "#E4E4E4"  # grey: a filter removed this token
CHOSEN = "#F6C56B"  # the token the draw (or greedy, or you) took


class SamplingStagesPanel(QWidget):
    """A table of the candidates through every sampling stage, and the draw as a cumulative bar."""

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.stages = None  # the CandidateStages drawn (tests read it)
        self.header = QLabel("Step once to see how the next token is picked, stage by stage.")
        self.header.setWordWrap(True)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.setWordWrap(False)
        self.table.viewport().installEventFilter(self)
        self.rest = QLabel()
        self.rest.setWordWrap(True)
        self.fold_note = QLabel()  # which rows are folded away, when some are
        self.fold_note.setWordWrap(True)
        self.fold_note.hide()
        self.folded = range(0)  # the rows folded away (tests read it)
        self.hidden_columns: set[int] = set()  # the columns a narrow table hides (tests read it)
        self._droppable: list[int] = []
        self._marks: list[tuple] = []
        self._cells: list[list[str]] = []
        self._chosen_row = 0
        self.draw_caption = QLabel()
        self.draw_caption.setWordWrap(True)
        self.draw_view = th.plot_widget()
        self.draw_view.setFixedHeight(130)
        plot = self.draw_view.getPlotItem()
        th.fix_plot(plot)
        plot.hideAxis("left")
        plot.setLabel("bottom", "cumulative probability, candidates laid end to end in the draw order")
        self.segments = pg.BarGraphItem(x0=[], y0=[], width=[], height=[])
        plot.addItem(self.segments)
        self.u_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(th.VERMILION, width=3))
        plot.addItem(self.u_line)
        self.labels = [pg.TextItem(anchor=(0.5, 0.5), color=th.DARK) for _ in range(SHOWN + 1)]
        for label in self.labels:
            plot.addItem(label)
        self.u_label = pg.TextItem(anchor=(0, 0), color=th.VERMILION)
        plot.addItem(self.u_label)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        self.table_room = WholeRows(self.table)
        layout.addWidget(self.table_room, 1)
        layout.addWidget(self.fold_note)
        layout.addWidget(self.rest)
        layout.addWidget(self.draw_caption)
        layout.addWidget(self.draw_view)
        self._dirty = False  # a result arrived while hidden
        self._given = None  # the SessionResult given last: drawn when shown (the state's may be newer, not yet given)
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        return []  # a tab of its own: drawn when shown, not in the overview's turns

    # ------------------------------------------------------------ drawing
    def _on_state_result(self, result) -> None:
        """Draw now if shown; a hidden view costs a step nothing and draws when it is shown."""
        self._dirty, self._given = True, result
        if self.isVisible():
            self._draw(result)

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if self._dirty and self._given is not None:
            self._draw(self._given)

    def _draw(self, result) -> None:
        self._dirty = False
        trace = result.trace
        if trace is None:
            self.stages = None
            self.table.setRowCount(0)
            self.header.setText("Step once (Space) to see how the next token is picked, stage by stage.")
            self.rest.setText("")
            self.draw_caption.setText("")
            self.segments.setOpts(x0=[], y0=[], width=[], height=[])
            self.u_line.hide()
            return
        dist, record = trace.distribution, trace.record
        s = dist.settings
        ids = np.asarray(trace.candidate_ids[:SHOWN], dtype=np.int64)
        pieces = tuple(trace.candidate_pieces[:SHOWN])
        if record.chosen not in ids:  # a token drawn from far down the list: always shown, last
            ids = np.append(ids, record.chosen)
            pieces += (trace.chosen_piece,)
        st = dist.stages(ids)
        self.stages = st
        greedy = s.is_greedy
        how = {"greedy": "greedy", "sampled": "the random draw", "user": "you (a click on a candidate)"}[record.chosen_by]
        self.header.setText(
            f"<b>Step {record.step}</b>: how “{escape(trace.chosen_piece, quote=False)}” was picked, by {how}. "
            f"Settings: {escape(s.describe(), quote=False)} ({settings_source(result.info, s)}). Read left to right: each column is one stage, in the order applied."
        )
        # titles of short lines: each column no wider than its numbers (all nine fit 1280 px, projector)
        columns = [
            "token (id)",
            "1 · raw\nlogit",
            "2 · penalty\n" + ("(off)" if s.repetition_penalty == 1 else f"{s.repetition_penalty:g}"),
            "3 · greedy:\nno\ntemperature" if greedy else f"3 · ÷\ntemperature\n{s.temperature:g}",
            "4 · top-k\n" + ("(off)" if greedy or not s.top_k else str(s.top_k)),
            "5 · softmax:\nprobability",
            "6 · top-p\n" + ("(off)" if greedy or s.top_p >= 1 else f"{s.top_p:g}:\nrunning total"),
            "7 · sampling\nprobability",
            "8 · draw:\nstretch",
        ]
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        self.table.setRowCount(len(ids) + 1)
        raw = record.logits[ids]
        self._marks = []  # per row: the marks of columns a narrow form hides, said in another cell
        for row, (token, piece) in enumerate(zip(ids, pieces)):
            chosen = int(token) == record.chosen
            removed = st.removed_by[row]
            self._marks.append((
                f"{piece} ({int(token):,}) (in text)" if st.in_context[row] else None,  # the penalty column's mark
                "removed by top-k" if removed == "top-k" else None,  # the top-k column's
            ))
            cells = [
                f"{piece} ({int(token):,})",
                f"{raw[row]:.3f}",
                _penalty_text(raw[row], st.after_penalty[row], st.penalised[row], st.in_context[row], s.repetition_penalty),
                "—" if greedy else f"{st.after_temperature[row]:.3f}",
                "—" if greedy else ("removed" if removed == "top-k" else "kept"),
                f"{st.before_top_p[row]:.2%}" if removed != "top-k" else "—",
                "—" if greedy or removed == "top-k" else (
                    f"{st.top_p_cumulative[row]:.2%}" + (" removed" if removed == "top-p" else "")
                ),
                f"{st.probs[row]:.2%}",
                _segment_text(st.draw_start[row], st.draw_end[row], record.draw_u, greedy),
            ]  # fmt: skip
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if chosen:
                    item.setBackground(QBrush(QColor(CHOSEN)))
                elif col == 2 and st.penalised[row]:
                    item.setBackground(QBrush(QColor(PENALISED)))
                elif removed and col >= (4 if removed == "top-k" else 6):
                    item.setBackground(QBrush(QColor(REMOVED)))
                self.table.setItem(row, col, item)
            if chosen:
                chosen_row = row
        last = len(ids)
        rest_cells = [f"{st.rest_tokens:,} others", "", "", "", "", f"{st.rest_before_top_p:.2%}", "", f"{st.rest_prob:.2%}", ""]
        for col, text in enumerate(rest_cells):
            item = QTableWidgetItem(text)
            item.setForeground(QBrush(QColor("#555555")))
            if col:
                item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            self.table.setItem(last, col, item)
        total = float(np.sum(st.probs, dtype=np.float64)) + st.rest_prob
        self.rest.setText(
            f"The other {st.rest_tokens:,} tokens of the vocabulary: the penalty touched {st.rest_penalised:,} of them, "
            f"top-k removed {st.rest_removed_by_top_k:,} and top-p {st.rest_removed_by_top_p:,}; together they hold "
            f"{st.rest_prob:.2%} of the sampling probability. Shown + rest = {total:.4f}. Softmax turns logits into "
            "probabilities: each is e^logit divided by the sum over every token. Entropy: sampling "
            f"{trace.sampling_entropy_bits:.2f} of at most {trace.sampling_entropy_ceiling_bits:.2f} bits (the "
            f"{trace.tokens_left:,} token{'' if trace.tokens_left == 1 else 's'} left), model {trace.model_entropy_bits:.2f} of at most "
            f"{trace.model_entropy_ceiling_bits:.1f} bits (the whole vocabulary)."
        )
        self._chosen_row = chosen_row
        self._droppable = droppable_columns(s)
        self._cells = [[self.table.item(r, c).text() for c in (0, 5)] for r in range(len(ids))]
        self._fit_columns()
        self._fold_rows()
        self._draw_the_draw(st, pieces, record, greedy, trace.chosen_piece)

    def _fold_rows(self) -> None:
        """The top candidates and the chosen row in view together: rows between them are folded away
        when the viewport cannot hold both (``folded_rows``), and the table starts at its top."""
        rows = self.table.rowCount()
        if not rows:
            return
        height = max(1, self.table.rowHeight(0))
        fits = max(1, self.table.viewport().height() // height)
        hidden = folded_rows(self._chosen_row, fits)
        for row in range(rows):
            self.table.setRowHidden(row, row in hidden)
        self.folded = hidden
        self.fold_note.setText(
            f"Rows {hidden.start + 1} to {hidden.stop} are folded away, so that the top {PINNED} and the chosen row "
            "are in view together (a taller window shows every row)." if hidden else "")
        self.fold_note.setVisible(bool(hidden))
        self.table.scrollToTop()
        self.table_room.snap()

    def _fit_columns(self) -> None:
        """As many stage columns as the table's width holds, whole: the columns ``droppable_columns``
        names are hidden in turn until the rest fit, and the mark a hidden column carried is said in
        another cell (the penalty's "(in text)" by the token, top-k's "removed" in the softmax column).
        Every row is measured (the caller folds rows again after), so a row shown later fits too."""
        table = self.table
        header = table.horizontalHeader()
        room = table.viewport().width()
        for row in range(table.rowCount()):  # every row measured, the folded ones too: folded again after
            table.setRowHidden(row, False)
        hidden: set[int] = set()
        for step in range(len(self._droppable) + 1):
            hidden = set(self._droppable[:step])
            self._say_marks(hidden)
            for column in range(table.columnCount()):
                table.setColumnHidden(column, column in hidden)
            header.resizeSections(QHeaderView.ResizeToContents)  # the widths drawn, titles and cells
            need = header.length()
            if need <= room:
                break
        self.hidden_columns = hidden
        # room for the pinned rows and the chosen row under the column titles (and a sideways
        # scrollbar only where even the narrowest form is wider than the table)
        bar = table.horizontalScrollBar().sizeHint().height() if need > room else 0
        table.setMinimumHeight(header.sizeHint().height() + (PINNED + 1) * table.rowHeight(0) + bar + 2 * table.frameWidth())
        self.table_room.updateGeometry()

    def _say_marks(self, hidden: set[int]) -> None:
        for row, ((token, topk), (token_text, softmax_text)) in enumerate(zip(self._marks, self._cells)):
            self.table.item(row, 0).setText(token if token and 2 in hidden else token_text)
            self.table.item(row, 5).setText(topk if topk and 4 in hidden else softmax_text)

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
        """The table's viewport changed (the window's size, or the lines of the header above it): as
        many columns as its width holds, and fold again for the rows its height holds now."""
        if event.type() == QEvent.Resize and self.stages is not None:
            if event.size().width() != event.oldSize().width():
                self._fit_columns()
            self._fold_rows()
        return False

    def _draw_the_draw(self, st, pieces, record, greedy: bool, chosen_piece: str) -> None:
        plot = self.draw_view.getPlotItem()
        if greedy or record.chosen_by == "user" or math.isnan(record.draw_u):
            self.segments.setOpts(x0=[], y0=[], width=[], height=[])
            self.u_line.hide()
            self.u_label.setText("")
            for label in self.labels:
                label.setText("")
            why = ("Greedy: no random number is drawn; the token with the highest logit is taken."
                   if greedy else "You chose this token: no random number was drawn.")
            self.draw_caption.setText(f"<b>8 · The draw.</b> {why}")
            return
        found = st.draw_rank >= 0
        starts, ends = st.draw_start[found], st.draw_end[found]
        chosen = np.asarray(st.ids[found]) == record.chosen
        colors = [CHOSEN if c else ("#9CC9EA" if i % 2 else th.SKY) for i, c in enumerate(chosen)]  # light: labels read
        # the tokens that are not rows fill the gaps between the shown stretches, and the end
        order = np.argsort(starts)
        edges = np.concatenate([[0.0], ends[order]]), np.concatenate([starts[order], [1.0]])
        gaps = [(a, b - a) for a, b in zip(*edges) if b - a > 1e-9]
        x0 = np.append(starts, [a for a, _ in gaps])
        widths = np.append(ends - starts, [w for _, w in gaps])
        colors += [REMOVED] * len(gaps)
        self.segments.setOpts(x0=x0, y0=np.zeros(len(x0)), width=widths, height=np.ones(len(x0)),
                              brushes=[pg.mkBrush(c) for c in colors], pens=[pg.mkPen("w") for _ in colors])
        shown_pieces = [p for p, f in zip(pieces, found) if f]
        for i, label in enumerate(self.labels):
            if i < len(starts) and ends[i] - starts[i] > 0.04:  # wide enough to name
                label.setText(shown_pieces[i][:8])
                label.setPos((starts[i] + ends[i]) / 2, 0.5)
            else:
                label.setText("")
        u = float(record.draw_u)
        self.u_line.setPos(u)
        self.u_line.show()
        self.u_label.setText(f"u = {u:.4f}")
        self.u_label.setPos(u, 1.5)
        plot.setRange(xRange=(0, 1), yRange=(-0.05, 1.55), padding=0)
        where = np.flatnonzero(chosen)
        segment = f"[{st.draw_start[found][where[0]]:.4f}, {st.draw_end[found][where[0]]:.4f})" if len(where) else "beyond the shown ones"
        seed = record.settings.seed
        source = f"the generator seeded with ({seed}, step {record.step})" if seed is not None else "an unseeded generator"
        self.draw_caption.setText(
            f"<b>8 · The draw.</b> u = {u:.4f}, a random number in [0, 1) from {source}. Laid end to end from the most "
            f"to the least likely, the candidates cover [0, 1); u falls in “{escape(chosen_piece, quote=False)}”'s stretch "
            f"{segment}, so that token is taken. The tokens that are not rows of the table fill the grey stretches."
        )

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        self.table.setFont(theme.font())
        self.header.setFont(theme.font(1))
        th.style_plot(self.draw_view.getPlotItem(), theme, bottom="cumulative probability, candidates laid end to end in the draw order")
        for label in self.labels:
            label.setFont(theme.font(-1))
        self.u_label.setFont(theme.font(0, bold=True))


class WholeRows(QWidget):
    """The room the sampling table may take: the table stands at its top, as tall as the whole rows
    that fit, and the last few pixels (less than a row) stay blank rather than show a row cut in half."""

    def __init__(self, table: QTableWidget, parent: QWidget | None = None):
        super().__init__(parent)
        self.table = table
        table.setParent(self)

    @guarded(fallback=lambda self: QSize())
    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return self.table.sizeHint()

    @guarded(fallback=lambda self: QSize())
    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.table.minimumSizeHint().width(), self.table.minimumHeight())

    def snap(self) -> None:
        """The table's height: its titles and frame, and the rows from the top one in view that fit whole."""
        table = self.table
        chrome = table.height() - table.viewport().height()  # the column titles, the frame, a sideways scroll bar
        room = self.height() - chrome
        used, row = 0, max(0, table.rowAt(0))
        while row < table.rowCount() and (table.isRowHidden(row) or used + table.rowHeight(row) <= room):
            used += 0 if table.isRowHidden(row) else table.rowHeight(row)
            row += 1
        table.setGeometry(0, 0, self.width(), chrome + (room if row >= table.rowCount() else used))

    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.snap()


def settings_source(info, settings) -> str:
    """Where ``settings`` came from, for the model ``info`` describes, in a few words: its
    generation_config.json (when that sets do_sample, as ``generate`` reads it), the window's defaults
    (it sets none: ``generate`` would pick greedily, the window samples so every step shows a draw),
    or the person's sampling panel."""
    if "do_sample" in dict(info.generation) and settings == model_settings(info.generation):
        return "the model's own: its generation_config.json"
    if settings == DEFAULT_SETTINGS:
        return "the window's defaults: the model sets no do_sample"
    return "chosen in the sampling panel"


def droppable_columns(settings) -> list[int]:
    """The table's columns a narrow table hides, first to last: the draw's stretch (the bar under the
    table shows it), top-k's kept or removed (the softmax column then says "removed by top-k"), the
    penalty when it is off (the token cell then says "(in text)"), and when greedy the temperature
    and top-p columns, which show only "—". The token, the raw logit, the probabilities stay."""
    order = [8, 4]
    if settings.repetition_penalty == 1:
        order.append(2)
    if settings.is_greedy:
        order += [3, 6]
    return order


def folded_rows(chosen: int, fits: int, pinned: int = PINNED) -> range:
    """The rows to fold away so that rows 0 to ``pinned - 1`` and row ``chosen`` are in a view of
    ``fits`` rows together, with as many rows just above ``chosen`` as there is room for; none when
    rows 0 to ``chosen`` fit."""
    if chosen < fits:
        return range(0)
    pinned = min(pinned, fits - 1)  # a view shorter than the pinned rows: as many as fit above the chosen one
    return range(pinned, chosen - (fits - pinned - 1)) if pinned > 0 else range(0)


def _penalty_text(raw: float, after: float, penalised: bool, in_context: bool, penalty: float) -> str:
    if not in_context:
        return f"{after:.3f}"
    if not penalised:
        return f"{after:.3f} (in text)"
    how = f"÷{penalty:g}" if raw > 0 else f"×{penalty:g}"
    return f"{after:.3f} ({how})"  # the raw logit is one column to the left


def _segment_text(start: float, end: float, u: float, greedy: bool) -> str:
    if greedy or math.isnan(start):
        return "—"
    text = f"{start:.4f}–{end:.4f}"
    if not math.isnan(u) and start <= u < end:
        text += " ← u"
    return text


"""Branches: every continuation taken from this prompt, where each split, and two compared.

Nothing taken is lost: a click on another candidate, or Back then another draw, starts a branch
beside the earlier one (``engine.branches``). The tree lists each stretch of steps between splits:
the step it starts at, the token taken there with the model's probability of it, and its text;
the branch on screen is marked ▶ and bold. A double-click shows that branch in every panel as it
was (the engine switches to it; nothing is recomputed).

Below, two branches side by side from the step where they split: their texts, the model's
probability of each token step by step (a table and a plot) and each continuation's total
log-probability. The probabilities are the model's own (softmax of the raw logits, before any
sampling setting), so the two are compared on the same scale whatever the settings were.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.branches import ROOT, BranchTable
from engine.tokens import piece_bytes

from app.window import theme as th
from app.window.guard import guarded
from app.logic.state import AppState
from app.panels.empty_note import EmptyNote
from app.panels.wrapped_cells import KEEP_END, WrappedColumn

NODE = Qt.UserRole  # the tree item's data: the node a double-click switches to
TEXT = 2  # the tree's column of texts
TEXT_LINES = 3  # the most lines a text in it takes; a longer text says how much it leaves out


def text_of(pieces) -> str:
    """The readable pieces (␣ for a space…) as the text they stand for, on one line (⏎ for a newline)."""
    return b"".join(piece_bytes(p) for p in pieces).decode("utf-8", errors="replace").replace("\n", " ⏎ ")


def last_words(text: str, chars: int) -> str:
    """The end of ``text`` in at most ``chars`` characters, whole words only (a word cut reads as
    another); a last word longer than that: that word, whole."""
    if len(text) <= chars:
        return text
    tail = text[-chars:]
    if text[-chars - 1] != " ":
        tail = tail.split(" ", 1)[1] if " " in tail else text.rsplit(" ", 1)[-1]
    return tail.lstrip()


def first_words(text: str, chars: int) -> str:
    """The start of ``text`` in about ``chars`` characters, whole words, "…" after it when more follows."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    if text[chars] != " " and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip() + " …"


def segments(table: BranchTable) -> dict[int, list[int]]:
    """Each stretch of steps without a split, by its first node: the nodes from it while each has
    exactly one child (a stretch ends at a leaf or where the tree splits)."""
    out: dict[int, list[int]] = {}
    starts = table.children(ROOT)
    while starts:
        start = starts.pop(0)
        run = [start]
        while len(below := table.children(run[-1])) == 1:
            run.append(below[0])
        out[start] = run
        starts.extend(table.children(run[-1]))
    return out


def branch_name(table: BranchTable, leaf: int) -> str:
    return f"branch {table.leaves().index(leaf) + 1}"


class BranchesPanel(QWidget):
    """The branch tree and a side-by-side comparison of two branches."""

    switchRequested = Signal(int)  # a tree node

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.table: BranchTable | None = None
        self.header = QLabel("Step, then go Back and take another token: every continuation stays here as a branch.")
        self.header.setWordWrap(True)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Where it starts", "Token taken there (model probability)", "Text from there"])
        self.tree.setWordWrap(False)  # its text column wraps itself, whole words only (WrappedColumn)
        self.tree_text = WrappedColumn(self.tree, TEXT, TEXT_LINES)
        self.tree.header().setStretchLastSection(True)
        self.tree.itemDoubleClicked.connect(self._on_tree_item_double_clicked)
        self.tree.itemActivated.connect(self._on_tree_item_double_clicked)  # Enter on a row

        self.a_box, self.b_box = QComboBox(), QComboBox()
        for box in (self.a_box, self.b_box):
            box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(24)
            box.activated.connect(self._on_box_activated)
        picks = QHBoxLayout()
        picks.addWidget(QLabel("Compare"))
        picks.addWidget(self.a_box, 1)
        picks.addWidget(QLabel("with"))
        picks.addWidget(self.b_box, 1)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.PlainText)
        self.steps_table = QTableWidget(0, 5)
        # titles of two short lines, so the columns are as narrow as their cells (1024 px, projector)
        self.steps_table.setHorizontalHeaderLabels(["step", "A:\ntoken", "A:\nmodel p", "B:\ntoken", "B:\nmodel p"])
        self.steps_table.verticalHeader().setVisible(False)
        self.steps_table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.steps_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.plot_view = th.plot_widget()
        self.plot_view.setMinimumHeight(160)
        plot = self.plot_view.getPlotItem()
        th.fix_plot(plot)
        plot.showGrid(x=False, y=True, alpha=0.25)
        plot.addLegend(offset=(8, 4))
        self.a_line = plot.plot([], [], name="A", symbol="o")
        self.b_line = plot.plot([], [], name="B", symbol="s")
        self.plot_note = EmptyNote(
            self.plot_view, "With a second branch (go Back, then take another token) the model probability of each "
            "branch's tokens appears here, step by step, A against B.")

        compare = QWidget()
        lower = QVBoxLayout(compare)
        lower.setContentsMargins(0, 0, 0, 0)
        lower.addLayout(picks)
        lower.addWidget(self.summary)
        row = QHBoxLayout()
        row.addWidget(self.steps_table, 2)
        row.addWidget(self.plot_view, 3)
        lower.addLayout(row, 1)
        self.splitter = split = QSplitter(Qt.Vertical)
        split.addWidget(self.tree)
        split.addWidget(compare)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(split, 1)
        self._drawn: BranchTable | None = None
        self._pair: tuple[int, int] | None = None  # the leaves compared (A, B), kept across results
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        return []  # drawn when shown, not in a step's turns

    # ------------------------------------------------------------- results
    def _on_state_result(self, result) -> None:
        self.table = result.branches
        if self.isVisible():  # hidden, a step costs this view nothing: it draws when shown
            self.redraw()

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.redraw()

    def redraw(self) -> None:
        table = self.table
        if table is self._drawn:
            return
        self._drawn = table
        self.tree.clear()
        if table is None or len(table) == 0:
            self.header.setText(
                "No step yet. Step, then go Back (←) and take another token (click a candidate, or change a "
                "setting): every continuation stays here as a branch you can return to and compare."
            )
            self._fill_boxes([])
            self._compare()
            return
        leaves = table.leaves()
        dropped = f" {table.dropped:,} older steps were dropped to save memory." if table.dropped else ""
        self.header.setText(
            f"{len(leaves)} branch{'es' if len(leaves) != 1 else ''}, {len(table):,} step{'s' if len(table) != 1 else ''} in all. ▶ marks the one on "
            f"screen; double-click a row (or press Enter) to show that branch in every panel as it was.{dropped}"
        )
        self._fill_tree(table)
        self._fill_boxes(leaves)
        self._compare()

    def _fill_tree(self, table: BranchTable) -> None:
        on_screen = set(table.path)
        bold = QFont(self.font())
        bold.setBold(True)
        result = self.state.result
        prompt_text = (result.prompt_text if result else "").replace("\n", " ⏎ ")
        prompt = QTreeWidgetItem(["prompt", "", prompt_text])
        prompt.setData(TEXT, KEEP_END, True)  # where the branches go on from: its end
        prompt.setToolTip(TEXT, result.prompt_text if result else "")  # the whole prompt, however long
        self.tree.addTopLevelItem(prompt)
        items: dict[int, QTreeWidgetItem] = {ROOT: prompt}
        for start, run in segments(table).items():
            i = table.index(start)
            parent = int(table.parents[i])
            p = math.exp(table.logprobs[i])
            how = " (you chose it)" if table.chosen_by[i] == "user" else ""
            marked = any(n in on_screen for n in run)
            where = "prefill" if table.steps[i] == 0 else f"step {int(table.steps[i])}"
            text = text_of(table.pieces[table.index(n)] for n in run)
            item = QTreeWidgetItem(
                [f"{'▶ ' if marked else ''}{where}", f"“{table.pieces[i]}”  {p:.1%}{how}", text]
            )
            item.setData(0, NODE, table.leaf_of(run[-1]))
            item.setToolTip(TEXT, text)
            if marked:
                for column in range(3):
                    item.setFont(column, bold)
            items[parent].addChild(item)
            items[run[-1]] = item
        self.tree.expandAll()
        for column in range(2):
            self.tree.resizeColumnToContents(column)

    def _fill_boxes(self, leaves: list[int]) -> None:
        table = self.table
        current = table.leaf_of(table.current) if table is not None and table.current != ROOT else None
        a, b = self._pair or (None, None)
        if a not in leaves:
            a = current if current in leaves else (leaves[-1] if leaves else None)
        if b not in leaves or b == a:
            others = [leaf for leaf in leaves if leaf != a]
            b = others[-1] if others else None
        self._pair = (a, b) if a is not None else None
        for box, chosen in ((self.a_box, a), (self.b_box, b)):
            box.blockSignals(True)
            box.clear()
            for leaf in leaves:
                tail = text_of(table.pieces[table.index(n)] for n in table.path_to(leaf)[-16:])
                box.addItem(f"{branch_name(table, leaf)}: …{last_words(tail, 40)}", leaf)
                box.setItemData(box.count() - 1, tail, Qt.ToolTipRole)
            box.setCurrentIndex(leaves.index(chosen) if chosen is not None else -1)  # none: nothing to compare with
            box.blockSignals(False)

    @guarded
    def _on_box_activated(self, _index: int) -> None:
        self._pair = (self.a_box.currentData(), self.b_box.currentData())
        self._compare()

    @guarded
    def _on_tree_item_double_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        node = item.data(0, NODE)
        if node is not None:
            self.switchRequested.emit(int(node))

    # ------------------------------------------------------------ comparing
    def comparison(self) -> dict | None:
        """The two branches compared, from their split: ``steps`` (the step numbers), per branch its
        tokens, pieces, probabilities and total log-probability; None with fewer than two branches."""
        table = self.table
        if table is None or self._pair is None or None in self._pair:
            return None
        a, b = self._pair
        split = table.split(a, b)
        first = 0 if split == ROOT else int(table.steps[table.index(split)]) + 1
        out = {"split": split, "first_step": first}
        for name, leaf in (("a", a), ("b", b)):
            nodes = table.path_to(leaf)[first:]
            rows = [table.index(n) for n in nodes]
            out[name] = {
                "leaf": leaf,
                "pieces": [table.pieces[r] for r in rows],
                "tokens": [int(table.tokens[r]) for r in rows],
                "probs": [math.exp(table.logprobs[r]) for r in rows],
                "logprob": float(sum(table.logprobs[r] for r in rows)),
            }
        return out

    def _compare(self) -> None:
        c = self.comparison()
        table = self.table
        self.steps_table.setRowCount(0)
        if c is None:
            self.summary.setText(
                "Two branches are needed to compare: go Back a few steps and take another token (click a candidate)."
            )
            self.a_line.setData([], [])
            self.b_line.setData([], [])
            self.plot_note.show()  # no empty axes: what will appear
            return
        self.plot_note.hide()
        a, b = c["a"], c["b"]
        shared = table.path_to(c["split"]) if c["split"] != ROOT else []
        where = "at the prefill" if c["first_step"] == 0 else f"at step {c['first_step']}"
        shared_text = text_of(table.pieces[table.index(n)] for n in shared)
        lines = [f"They split {where}, after “…{last_words(shared_text, 60)}”. Total log-probability under the model: closer to 0 = more likely."]
        for name, side in (("A", a), ("B", b)):
            lines.append(
                f"{name} ({branch_name(table, side['leaf'])}) goes on “{first_words(text_of(side['pieces']), 80)}”: "
                f"{side['logprob']:.2f} over {len(side['pieces'])} token{'s' if len(side['pieces']) != 1 else ''}."
            )
        self.summary.setText("\n".join(lines))
        rows = max(len(a["pieces"]), len(b["pieces"]))
        self.steps_table.setRowCount(rows)
        for r in range(rows):
            cells = [str(c["first_step"] + r)]
            for side in (a, b):
                cells += [f"“{side['pieces'][r]}”", f"{side['probs'][r]:.1%}"] if r < len(side["pieces"]) else ["", ""]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column in (2, 4):
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.steps_table.setItem(r, column, item)
        self._fit_steps_table()
        for line, side in ((self.a_line, a), (self.b_line, b)):
            steps = np.arange(len(side["probs"])) + c["first_step"]
            line.setData(steps, np.array(side["probs"]) * 100)
        every = max(1, math.ceil(rows / 8))  # whole steps on the axis, about eight of them
        self.plot_view.getPlotItem().getAxis("bottom").setTickSpacing(every, every)
        self._style_plot(100 * max(max(a["probs"], default=0), max(b["probs"], default=0)))

    def _fit_steps_table(self) -> None:
        """The steps table as wide as its columns (and a vertical scrollbar), never scrolling sideways:
        the plot beside it takes what is left."""
        table = self.steps_table
        header = table.horizontalHeader()
        columns = sum(max(table.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in range(table.columnCount()))
        table.setMinimumWidth(columns + 2 * table.frameWidth() + table.verticalScrollBar().sizeHint().width())

    def _style_plot(self, top: float = 100.0) -> None:
        """Fonts and pens of the plot; its probability axis up to a little above ``top`` (%)."""
        theme = self.state.theme
        plot = self.plot_view.getPlotItem()
        th.style_plot(plot, theme, left="model p (%)", bottom="step")
        for line, color in ((self.a_line, th.BRANCH_A), (self.b_line, th.BRANCH_B)):
            line.setPen(theme.pen(color))
            line.setSymbolBrush(pg.mkBrush(color))
            line.setSymbolPen(None)
            line.setSymbolSize(theme.text_px() // 2 + 4)
        plot.setYRange(0, min(100.0, th.nice_ceil(top * 1.1)), padding=0.02)  # fitted to the data

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        for widget in (self.tree, self.steps_table, self.summary, self.header, self.a_box, self.b_box):
            widget.setFont(theme.font())
        legend = self.plot_view.getPlotItem().legend
        self.tree.setMinimumHeight(7 * theme.text_px() + 8)  # the prompt and a few branches, in any theme
        self.steps_table.setMinimumHeight(4 * theme.text_px() + 8)
        self._fit_steps_table()
        self._style_plot()
        self._drawn = None
        if self.isVisible():
            self.redraw()

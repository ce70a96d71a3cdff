"""A tree's column whose texts wrap at spaces in the column's width, at most a few lines each: a text
longer than that shows its first whole words (or, for a row marked ``KEEP_END``, its last) and says how
many characters it leaves out (``app.logic.text_fit.cut_lines``), never cut with "…". The whole text
stays the item's own, for its tooltip. Rows are laid out again when the column changes width."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QTreeView

from app.logic.text_fit import cut_lines
from app.window.guard import guarded

LINE_BREAK = "\u2028"  # Unicode's line separator: Qt both measures and draws an item's lines at it ("\n" it only draws)
KEEP_END = Qt.UserRole + 1  # True on an item whose end matters more than its start (a prompt)


class WrappedColumn(QStyledItemDelegate):
    """Draws ``column`` of ``view`` wrapped in at most ``max_lines`` lines, whole words only."""

    def __init__(self, view: QTreeView, column: int, max_lines: int):
        super().__init__(view)
        self.view = view
        self.column = column
        self.max_lines = max_lines
        view.setItemDelegateForColumn(column, self)
        view.header().sectionResized.connect(self._on_header_section_resized)

    def lines(self, text: str, font, keep_end: bool = False) -> list[str]:
        """``text`` as the column shows it in ``font``, one string per line."""
        view = self.view
        margin = 2 * (view.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, view) + 1)
        width = view.header().sectionSize(self.column) - margin
        return cut_lines(text, width, QFontMetrics(font).horizontalAdvance, self.max_lines, keep_end=keep_end)

    @guarded
    def initStyleOption(self, option, index) -> None:  # noqa: N802 - Qt's name; sizeHint and paint both ask it
        super().initStyleOption(option, index)
        if option.text:
            option.text = LINE_BREAK.join(self.lines(option.text, option.font, bool(index.data(KEEP_END))))

    @guarded
    def _on_header_section_resized(self, column: int, _old: int, _new: int) -> None:
        if column == self.column:
            self.view.scheduleDelayedItemsLayout()  # each row's height again, for the new width

"""Where the panels go: as many side by side as the window has room for, the rest on tabs.

The panels come in the order the model computes, grouped in columns (embeddings over attention,
candidates over sampling, the KV cache). A column whose panels do not fit one above the other at
their minimum heights is split into one column per panel; then columns are packed, in order, onto
pages as wide as the window, and each page is a tab (the tab bar is hidden when one page holds
them all). A panel never gets less than its ``minimumSizeHint``, which each panel derives from its
fonts and the room its plots need to be read, so a small screen gets more tabs, never squeezed
plots. ``focus(panel)`` shows one panel alone, filling the area, until ``focus(None)``.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QSplitter, QTabWidget, QVBoxLayout, QWidget

from .guard import guarded

SPACING = 6  # between columns and between panels in a column (splitter handles)


def plan_pages(columns: list[list[QWidget]], width: int, height: int, *, spacing: int = SPACING) -> list[list[list[QWidget]]]:
    """Pages of columns of panels that fit ``width`` x ``height``, in reading order.

    A column taller than ``height`` at its panels' minimum heights becomes one column per panel; a
    page takes columns while their minimum widths fit ``width``, and always at least one."""
    fitted: list[list[QWidget]] = []
    for column in columns:
        need = sum(p.minimumSizeHint().height() for p in column) + spacing * (len(column) - 1)
        fitted.extend([column] if need <= height or len(column) == 1 else [[p] for p in column])
    pages: list[list[list[QWidget]]] = []
    used = 0
    for column in fitted:
        w = max(p.minimumSizeHint().width() for p in column)
        if pages and used + spacing + w <= width:
            pages[-1].append(column)
            used += spacing + w
        else:
            pages.append([column])
            used = w
    return pages


class StageArea(QWidget):
    """The panels below the prompt, laid out by ``plan_pages`` for the room the area has."""

    pagesChanged = Signal()  # the panels moved to other pages (tests and the window hear it)

    def __init__(self, columns: list[list[QWidget]], weights: dict[QWidget, int], parent: QWidget | None = None):
        """``columns``: the panels in reading order; ``weights``: each panel's share of the room of
        its column (heights) and of its page (column widths: a column's largest weight)."""
        super().__init__(parent)
        self.columns = columns
        self.weights = weights
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self.pages: list[list[list[QWidget]]] = []
        self.focused: QWidget | None = None
        self._splitters: list[QSplitter] = []

    def panels(self) -> list[QWidget]:
        return [p for column in self.columns for p in column]

    def focus(self, panel: QWidget | None) -> None:
        """Show ``panel`` alone (None: every panel again)."""
        self.focused = panel
        self.relayout(force=True)

    def page_of(self, panel: QWidget) -> int:
        return next((i for i, page in enumerate(self.pages) if any(panel in c for c in page)), -1)

    def show_panel(self, panel: QWidget) -> None:
        """Bring the page holding ``panel`` to the front."""
        i = self.page_of(panel)
        if i >= 0:
            self.tabs.setCurrentIndex(i)

    @guarded(fallback=lambda self: QSize())
    def minimumSizeHint(self) -> QSize:
        """Room for the largest panel alone on a page, under a tab bar: whatever the window's size,
        the panels then fit on some pages (what the current pages need does not count: they change
        with the size)."""
        w = max(p.minimumSizeHint().width() for p in self.panels())
        h = max(p.minimumSizeHint().height() for p in self.panels())
        return QSize(w, h + self.tabs.tabBar().sizeHint().height())

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.relayout()

    def relayout(self, *, force: bool = False) -> None:
        """Lay the panels out again if the room they have calls for other pages."""
        if self.focused is not None:
            pages = [[[self.focused]]]
        else:
            width, height = self.width(), self.height()
            pages = plan_pages(self.columns, width, height)
            if len(pages) > 1:  # the tab bar takes a line: plan again for the room under it
                pages = plan_pages(self.columns, width, height - self.tabs.tabBar().sizeHint().height())
        if pages == self.pages and not force:
            for splitter in self._splitters:  # a panel that needs more room now (new axis titles) gets it
                splitter.setSizes(splitter.sizes())
            return
        current = self.tabs.currentWidget()
        front = next((p for page in self.pages for c in page for p in c if current is not None and current.isAncestorOf(p)), None)
        self.pages = pages
        self._build()
        if front is not None:
            self.show_panel(front)
        self.pagesChanged.emit()

    def _build(self) -> None:
        shown = {p for page in self.pages for c in page for p in c}
        for panel in self.panels():  # out of the old pages first, so deleting them leaves the panels
            panel.hide()
            panel.setParent(self)
        old = [self.tabs.widget(i) for i in range(self.tabs.count())]
        self.tabs.clear()
        for widget in old:
            widget.deleteLater()
        self._splitters = []
        for page in self.pages:
            row = QSplitter(Qt.Horizontal)
            row.setChildrenCollapsible(False)
            row.setHandleWidth(SPACING)
            widths = []
            for column in page:
                if len(column) == 1:
                    row.addWidget(column[0])
                else:
                    stack = QSplitter(Qt.Vertical)
                    stack.setChildrenCollapsible(False)
                    stack.setHandleWidth(SPACING)
                    for panel in column:
                        stack.addWidget(panel)
                    stack.setSizes([self.weights.get(p, 1) * 100 for p in column])
                    row.addWidget(stack)
                    self._splitters.append(stack)
                widths.append(max(self.weights.get(p, 1) for p in column) * 100)
            row.setSizes(widths)
            self._splitters.append(row)
            self.tabs.addTab(row, " · ".join(p.short_title for c in page for p in c))
        for panel in shown:
            panel.show()
        self.tabs.tabBar().setVisible(len(self.pages) > 1)

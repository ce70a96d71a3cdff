"""Where the panels go: as many side by side as the window has room for, the rest on other pages.

The panels come in the order the model computes, grouped in columns (embeddings over attention,
candidates over sampling, the KV cache). A column whose panels do not fit one above the other at
their minimum heights is split into one column per panel; then columns are packed, in order, onto
pages as wide as the window. The pages are a QStackedWidget under a row of checkable buttons, one
per page, named for its panels (the row is hidden when one page holds them all; Ctrl+Tab and
Ctrl+Shift+Tab go to the next and previous page). Not a QTabWidget: its tab bar re-measured itself
on every layout pass a step set off, about 10 ms a drawn step (see benchmarks/RESULTS_GUI.md). A
panel never gets less than its ``minimumSizeHint``, which each panel derives from its fonts and
the room its plots need to be read, so a small screen gets more pages, never squeezed plots.
``focus(panel)`` shows one panel alone, filling the area, until ``focus(None)``.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QSplitter, QStackedWidget, QToolButton, QVBoxLayout, QWidget

from app.window.guard import guarded

SPACING = 6  # between columns and between panels in a column (splitter handles)


def _least(panel: QWidget) -> QSize:
    """The least size ``panel`` can be shown at: its minimum size hint, or its minimum where it set one
    (a titled panel keeps its title's room left of its ? and ⋯ buttons)."""
    return panel.minimumSizeHint().expandedTo(panel.minimumSize())


def plan_pages(columns: list[list[QWidget]], width: int, height: int, *, spacing: int = SPACING,
               least: dict[QWidget, QSize] | None = None) -> list[list[list[QWidget]]]:
    """Pages of columns of panels that fit ``width`` x ``height``, in reading order.

    A column taller than ``height`` at its panels' minimum heights becomes one column per panel; a
    page takes columns while their minimum widths fit ``width``, and always at least one. ``least``:
    each panel's least size, where the caller has it already (else asked here, once per panel)."""
    if least is None:
        least = {p: _least(p) for column in columns for p in column}
    fitted: list[list[QWidget]] = []
    for column in columns:
        need = sum(least[p].height() for p in column) + spacing * (len(column) - 1)
        fitted.extend([column] if need <= height or len(column) == 1 else [[p] for p in column])
    pages: list[list[list[QWidget]]] = []
    used = 0
    for column in fitted:
        w = max(least[p].width() for p in column)
        if pages and used + spacing + w <= width:
            pages[-1].append(column)
            used += spacing + w
        else:
            pages.append([column])
            used = w
    return pages


class OverviewPages(QWidget):
    """The panels below the prompt, laid out by ``plan_pages`` for the room the area has."""

    pagesChanged = Signal()  # the panels moved to other pages (tests and the window hear it)

    def __init__(self, columns: list[list[QWidget]], weights: dict[QWidget, int], parent: QWidget | None = None):
        """``columns``: the panels in reading order; ``weights``: each panel's share of the room of
        its column (heights) and of its page (column widths: a column's largest weight)."""
        super().__init__(parent)
        self.columns = columns
        self.weights = weights
        self.stack = QStackedWidget()
        self.page_bar = QWidget()  # the page buttons, in a row above the pages
        self._page_row = QHBoxLayout(self.page_bar)
        self._page_row.setContentsMargins(0, 0, 0, 0)
        self._page_row.setSpacing(2)
        self._page_row.addStretch(1)
        self._probe = QToolButton(self.page_bar)  # never shown: how tall a page button is before there is one
        self._probe.setText("Ag")
        self._probe.hide()
        self.page_buttons = QButtonGroup(self)  # exclusive: the checked one is the page shown
        self.page_buttons.idClicked.connect(self.show_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.page_bar)
        layout.addWidget(self.stack, 1)
        for keys, turn in ((QKeySequence.NextChild, 1), (QKeySequence.PreviousChild, -1)):  # Ctrl+Tab, Ctrl+Shift+Tab
            shortcut = QShortcut(keys, self, context=Qt.WindowShortcut)
            shortcut.activated.connect(lambda turn=turn: self._turn_page(turn))
        self.pages: list[list[list[QWidget]]] = []
        self.focused: QWidget | None = None
        self._splitters: list[QSplitter] = []
        self._before_focus: tuple[list, list[list[int]]] = ([], [])  # the pages and splitter sizes a focus left
        self._building = False  # in _build: a resize it causes must not lay out the half-built pages...
        self._resized = False  # ...but is laid out for once they are built
        self._planned: dict[QWidget, QSize] = {}  # each panel's least size when the pages were planned
        self._stale = False  # a step was drawn while the pages were hidden: planned again when shown
        self._grown = QTimer(self, singleShot=True, interval=0)  # a panel's least size grew: plan again, once
        self._grown.timeout.connect(self.relayout)
        for panel in self.panels():
            panel.installEventFilter(self)

    def panels(self) -> list[QWidget]:
        return [p for column in self.columns for p in column]

    def focus(self, panel: QWidget | None) -> None:
        """Show ``panel`` alone (None: every panel again, each at the size it had before)."""
        if panel is not None and self.focused is None:
            self._before_focus = (self.pages, [s.sizes() for s in self._splitters])
        self.focused = panel
        self.relayout(force=True)
        pages, sizes = self._before_focus
        if panel is None and pages == self.pages and len(sizes) == len(self._splitters):
            for splitter, held in zip(self._splitters, sizes):
                splitter.setSizes(held)

    def page_of(self, panel: QWidget) -> int:
        return next((i for i, page in enumerate(self.pages) if any(panel in c for c in page)), -1)

    def show_panel(self, panel: QWidget) -> None:
        """Bring the page holding ``panel`` to the front."""
        i = self.page_of(panel)
        if i >= 0:
            self.show_page(i)

    @property
    def current_page(self) -> int:
        """The index of the page in front (-1 before the first layout)."""
        return self.stack.currentIndex()

    def show_page(self, index: int) -> None:
        """Bring page ``index`` to the front, its button checked."""
        self.stack.setCurrentIndex(index)
        button = self.page_buttons.button(index)
        if button is not None:
            button.setChecked(True)

    def _turn_page(self, turn: int) -> None:
        if len(self.pages) > 1 and self.isVisible():
            self.show_page((self.current_page + turn) % len(self.pages))

    @guarded(fallback=lambda self: QSize())
    def minimumSizeHint(self) -> QSize:
        """Room for the largest panel alone on a page, under the page buttons: whatever the window's size,
        the panels then fit on some pages (what the current pages need does not count: they change
        with the size)."""
        least = [_least(p) for p in self.panels()]
        return QSize(max(s.width() for s in least), max(s.height() for s in least) + self._bar_height())

    def _bar_height(self) -> int:
        """What the row of page buttons takes of the height, when it is shown."""
        return max(self.page_bar.sizeHint().height(), self._probe.sizeHint().height()) + self.layout().spacing()

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.relayout()

    @guarded
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._stale:
            self._stale = False
            self.relayout()

    def relayout_when_shown(self) -> None:
        """``relayout`` now where the pages are on screen, else once they are shown again: behind
        another view (the Flow) a drawn step planned pages no one saw (about 1 ms a step)."""
        if self.isVisible():
            self.relayout()
        else:
            self._stale = True

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
        """A panel's contents asked for another layout (a step added a row of chips, a longer caption):
        where its least size grew past what the pages were planned for, plan them again (its page
        could not give it that room: its widgets would be drawn over each other)."""
        if event.type() == QEvent.LayoutRequest and self.focused is None and watched in self._planned:
            least, planned = _least(watched), self._planned[watched]
            if least.width() > planned.width() or least.height() > planned.height():
                self._grown.start()
        return False

    def relayout(self, *, force: bool = False) -> None:
        """Lay the panels out again if the room they have calls for other pages."""
        if self._building:  # removing the old pages resized the area: planned again once they are built
            self._resized = True
            return
        if self.focused is not None:
            pages = [[[self.focused]]]
        else:
            self._planned = {p: _least(p) for p in self.panels()}
            width, height = self.width(), self.height()
            pages = plan_pages(self.columns, width, height, least=self._planned)
            if len(pages) > 1:  # the page buttons take a line: plan again for the room under them
                pages = plan_pages(self.columns, width, height - self._bar_height(), least=self._planned)
        if pages == self.pages and not force:
            for splitter in self._splitters:  # a panel that needs more room now (new axis titles) gets it
                splitter.setSizes(splitter.sizes())
            return
        current = self.stack.currentWidget()
        front = next((p for page in self.pages for c in page for p in c if current is not None and current.isAncestorOf(p)), None)
        self.pages = pages
        self._building, self._resized = True, False
        try:
            self._build()
        finally:
            self._building = False
        if self._resized:
            self.relayout()
        if front is not None:
            self.show_panel(front)
        self.pagesChanged.emit()

    def _build(self) -> None:
        shown = {p for page in self.pages for c in page for p in c}
        for panel in self.panels():  # out of the old pages first, so deleting them leaves the panels
            panel.hide()
            panel.setParent(self)
        # the old pages and buttons are hidden now: until the event loop deletes them, they would be drawn
        for row in [self.stack.widget(i) for i in range(self.stack.count())]:
            row.hide()
            self.stack.removeWidget(row)
            row.deleteLater()
        for button in self.page_buttons.buttons():
            button.hide()
            self.page_buttons.removeButton(button)
            self._page_row.removeWidget(button)
            button.deleteLater()
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
            index = self.stack.addWidget(row)
            self._add_page_button(index, " · ".join(p.short_title for c in page for p in c))
        for panel in shown:
            panel.show()
        self.page_bar.setVisible(len(self.pages) > 1)
        self.show_page(0)

    def _add_page_button(self, index: int, title: str) -> None:
        button = QToolButton()
        button.setText(title)
        button.setCheckable(True)
        button.setAutoRaise(True)
        button.setFocusPolicy(Qt.NoFocus)  # keys: Ctrl+Tab and Ctrl+Shift+Tab (Space is Step in this window)
        button.setToolTip(f"Show {title} (Ctrl+Tab: the next page, Ctrl+Shift+Tab: the previous one)")
        self.page_buttons.addButton(button, index)
        self._page_row.insertWidget(index, button)

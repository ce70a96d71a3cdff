"""Inside's parts as one long page, or as pages in the order the model computes (embedding, attention,
MLP or experts, final norm and LM head, logit lens, sizes) with Back and Next.

Pages are for a projector and for any window where the long page would scroll more than two screens
(``SCREENS``): then one part is shown at a time, its name and "page k of n" above it. A part whose
name is empty for the model on screen (RoPE's page for a model with a position table) is no page:
its box is hidden and the pages are counted and turned without it. The window
gives → and ← (and Page Down / Page Up) to Next and Back while Inside is in front in that mode
(``app.window.inside_keys``), as the Flow's tour does.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPushButton, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from app.window import theme as th

SCREENS = 2  # the long page becomes pages when it would scroll more than this many screens


def needs_pages(projector: bool, content_px: int, screen_px: int) -> bool:
    """Pages, rather than one long page: in projector mode, or when ``content_px`` of parts would
    scroll more than SCREENS screens of ``screen_px``."""
    return projector or (screen_px > 0 and content_px - screen_px > SCREENS * screen_px)


class InsidePages(QWidget):
    """The parts' boxes in one scroll area; in paged mode only the current one is shown."""

    pagedChanged = Signal(bool)
    pageChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.boxes: list[QGroupBox] = []
        self.names: list[str] = []
        self.fills: list[bool] = []  # a part that takes the rest of its page (a table that scrolls itself)
        self.paged = False
        self.index = 0
        self.blank = True  # nothing to show yet
        self.back_button = QPushButton("◀ Back")
        self.back_button.setToolTip("The part before this one (←)")
        self.next_button = QPushButton("Next ▶")
        self.next_button.setToolTip("The next part, in the order the model computes (→)")
        self.title = QLabel()
        self.title.setWordWrap(True)  # a long name on a projector: a second line, never cut
        self.title.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # it wraps in the bar's room, not widening it
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.nav = QWidget()
        bar = QHBoxLayout(self.nav)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.back_button)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.next_button)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.body = QWidget()
        self.column = QVBoxLayout(self.body)
        self.column.addStretch(1)
        self.scroll.setWidget(self.body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.nav)
        layout.addWidget(self.scroll, 1)
        self.nav.hide()

    def add(self, box: QGroupBox, name: str, fills: bool = False) -> None:
        """Append ``box`` as the next part (and page), called ``name`` on the page bar."""
        self.column.insertWidget(len(self.boxes), box)
        self.boxes.append(box)
        self.names.append(name)
        self.fills.append(fills)
        self._sync()

    def restyle(self, theme: th.Theme) -> None:
        self.title.setFont(theme.font(0, bold=True))
        for button in (self.back_button, self.next_button):
            button.setFont(theme.font(0, bold=True))

    def set_names(self, names: list[str]) -> None:
        """The pages' names for the model and step on screen, also their boxes' titles ("2 · name");
        an empty name: that part is no page for this model."""
        self.names = list(names)
        present = self.present()
        if present and self.index not in present:  # the page shown left with the model: the next one that is a page
            self.index = next((i for i in present if i > self.index), present[-1])
        self._sync()

    def present(self) -> list[int]:
        """The parts that are pages for the model on screen (their names are not empty), in order."""
        return [i for i, name in enumerate(self.names) if name]

    def set_blank(self, blank: bool) -> None:
        """Hide every part (before the first answer) or show them."""
        self.blank = blank
        self._sync()

    def set_paged(self, paged: bool) -> None:
        if paged == self.paged:
            return
        self.paged = paged
        self._sync()
        self.pagedChanged.emit(paged)

    def content_height(self) -> int:
        """The height of every part one under the other, at the present width: the long page."""
        width = self.scroll.viewport().width() - 24
        spacing = self.column.spacing()
        boxes = [self.boxes[i] for i in self.present()]
        heights = [b.heightForWidth(width) if b.hasHeightForWidth() else b.sizeHint().height() for b in boxes]
        return sum(max(h, b.sizeHint().height()) for h, b in zip(heights, boxes)) + spacing * len(boxes)

    def screen_height(self) -> int:
        """One screen of the long page: the scroll area's height."""
        return self.scroll.viewport().height()

    def go(self, index: int) -> None:
        """Show part ``index`` (kept within the parts; a part that is no page: the next that is)."""
        index = max(0, min(index, len(self.boxes) - 1))
        present = self.present()
        if present and index not in present:
            index = next((i for i in present if i > index), present[-1])
        if index == self.index:
            return
        self.index = index
        self._sync()
        self.pageChanged.emit(index)

    def next(self) -> None:
        self.go(next((i for i in self.present() if i > self.index), self.index))

    def back(self) -> None:
        self.go(next((i for i in reversed(self.present()) if i < self.index), self.index))

    def page_text(self) -> str:
        """"Attention in block 3, head 0 · page 2 of 6": the page bar's words."""
        present = self.present()
        if self.index not in present:
            return ""
        return f"{self.names[self.index]} · page {present.index(self.index) + 1} of {len(present)}"

    def _sync(self) -> None:
        self.nav.setVisible(self.paged)
        present = self.present()
        for i, box in enumerate(self.boxes):
            current = i == self.index
            box.setHidden(self.blank or i not in present or (self.paged and not current))
            self.column.setStretchFactor(box, 1 if self.paged and current and self.fills[i] else 0)
        filled = self.paged and bool(self.boxes) and self.fills[self.index]
        self.column.setStretch(len(self.boxes), 0 if filled else 1)  # the blank below the parts: none under a filled page
        for k, i in enumerate(present):  # the page bar names a page: its box needs no title
            self.boxes[i].setTitle("" if self.paged else f"{k + 1} · {self.names[i]}")
        self.title.setText(self.page_text())
        self.back_button.setEnabled(self.paged and bool(present) and self.index > present[0])
        self.next_button.setEnabled(self.paged and bool(present) and self.index < present[-1])
        if self.paged:
            QTimer.singleShot(0, self._to_top)

    def _to_top(self) -> None:
        self.scroll.verticalScrollBar().setValue(0)

"""Inside's parts as one long page, or as pages in the order the model computes (embedding, attention,
MLP or experts, final norm and LM head, logit lens, sizes) with Back and Next.

Pages are for a projector and for any window where the long page would scroll more than two screens
(``inside_paging.needs_pages``): then a page shows as many consecutive parts as fit the screen
without scrolling (``inside_paging.group_pages``; a part taller than the screen, or the logit lens,
whose table scrolls itself, is a page of its own). The bar above names a page's one part, or counts
its several parts ("Parts 1 to 3 of 13"), with "page k of n"; on a page of several parts each box is
numbered and named, as on the long page. The
grouping is measured again when the window's size, the text size or the parts' contents change, and
the part on screen stays on screen. A part whose name is empty for the model on screen (RoPE's part
for a model with a position table) is no part of any page: its box is hidden. The window
gives → and ← (and Page Down / Page Up) to Next and Back while Inside is in front in that mode
(``app.window.inside_keys``), as the Flow's tour does.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt, QTimer, Signal
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPushButton, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from app.logic.inside_paging import group_pages
from app.window import theme as th


class InsidePages(QWidget):
    """The parts' boxes in one scroll area; in paged mode only the current page's parts are shown."""

    pagedChanged = Signal(bool)
    pageChanged = Signal(int)  # the part the page shown was turned to

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.boxes: list[QGroupBox] = []
        self.names: list[str] = []
        self.fills: list[bool] = []  # a part that takes the rest of its page (a table that scrolls itself)
        self.paged = False
        self.groups: list[list[int]] = []  # the parts on each page, in order (``group_pages``)
        self.index = 0  # the part turned to: its page is shown
        self.blank = True  # nothing to show yet
        self.back_button = QPushButton("◀ Back")
        self.back_button.setToolTip("The page before this one (←)")
        self.next_button = QPushButton("Next ▶")
        self.next_button.setToolTip("The next page, in the order the model computes (→)")
        self.title = QLabel()
        self.title.setWordWrap(True)  # a long name on a projector: a second line, never cut
        self.title.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # it wraps in the bar's room, not widening it
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.nav = QWidget()
        self.bar = QHBoxLayout(self.nav)
        self.bar.setContentsMargins(0, 0, 0, 0)
        self.bar.addWidget(self.back_button)
        self.bar.addWidget(self.title, 1)
        self.bar.addWidget(self.next_button)
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
        """Append ``box`` as the next part, called ``name`` on the page bar."""
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
        """The parts' names for the model and step on screen, also their boxes' titles ("2 · name");
        an empty name: that part is on no page for this model."""
        self.names = list(names)
        present = self.present()
        if present and self.index not in present:  # the part shown left with the model: the next one that is there
            self.index = next((i for i in present if i > self.index), present[-1])
        self._sync()

    def present(self) -> list[int]:
        """The parts there are for the model on screen (their names are not empty), in order."""
        return [i for i, name in enumerate(self.names) if name]

    def set_blank(self, blank: bool) -> None:
        """Hide every part (before the first answer) or show them."""
        self.blank = blank
        self._sync()

    def set_paged(self, paged: bool) -> None:
        """Pages (grouped again for the parts' heights and the room there is now) or one long page."""
        changed = paged != self.paged
        self.paged = paged
        if paged:
            for i in self.present():  # measured bare: a page of several parts adds their titles (``_grouped``)
                self.boxes[i].setTitle("")
            self.groups = self._grouped()
        self._sync()
        if changed:
            self.pagedChanged.emit(paged)

    def _part_heights(self, parts: list[int]) -> list[int]:
        """The height each of ``parts`` takes, one under the other at the width a page gives them (a
        box of wrapped text: its height for that width, as the column lays it out)."""
        margins = self.column.contentsMargins()
        width = self.scroll.width() - 2 * self.scroll.frameWidth() - margins.left() - margins.right()
        boxes = [self.boxes[i] for i in parts]
        for box in boxes:  # a hidden box's layouts keep the heights they had when it was last shown (another font)
            for widget in (*box.findChildren(QWidget), box):
                widget.updateGeometry()
        return [max(b.heightForWidth(width) if b.hasHeightForWidth() else b.sizeHint().height(), b.minimumSizeHint().height())
                for b in boxes]

    def content_height(self) -> int:
        """The height of every part one under the other, at the present width: the long page."""
        present = self.present()
        return sum(self._part_heights(present)) + self.column.spacing() * len(present)

    def screen_height(self) -> int:
        """One screen of the long page: the scroll area's height."""
        return self.scroll.viewport().height()

    def _page_room(self, first: int, last: int) -> int:
        """The height a page holding present parts ``first`` to ``last`` (their places in ``present``)
        leaves them: this widget less the bar, its title naming them (on more lines where it must)."""
        present = self.present()
        title = self._title_for(present[first:last + 1], len(present), len(present))  # "page k of n" at its widest
        buttons = (self.back_button, self.next_button)
        width = self.width() - sum(b.sizeHint().width() for b in buttons) - 2 * self.bar.spacing()
        lines = self.title.fontMetrics().boundingRect(QRect(0, 0, max(1, width), 100_000), int(Qt.TextWordWrap), title)
        bar = max(lines.height(), *(b.sizeHint().height() for b in buttons))
        margins = self.column.contentsMargins()
        return self.height() - bar - self.layout().spacing() - 2 * self.scroll.frameWidth() - margins.top() - margins.bottom()

    def _box_title_height(self) -> int:
        """The height a title adds to a part's box (on a page of several parts each box is named)."""
        box = self.boxes[0]
        kept = box.title()
        box.setTitle("")
        bare = box.minimumSizeHint().height()
        box.setTitle("Ag")
        named = box.minimumSizeHint().height()
        box.setTitle(kept)
        return named - bare

    def _grouped(self) -> list[list[int]]:
        """The present parts grouped into pages for the room there is now; a part that fills its page
        (the lens table, which scrolls itself) counts as tall as the room, so it is a page of its own."""
        present = self.present()
        if not present:
            return []
        title = self._box_title_height()

        def room(first: int, last: int) -> int:  # several parts: a title over each box
            return self._page_room(first, last) - (title * (last - first + 1) if last > first else 0)

        whole = self._page_room(0, 0)
        heights = [whole if self.fills[i] else h for i, h in zip(present, self._part_heights(present))]
        return [[present[k] for k in page] for page in group_pages(heights, room, self.column.spacing())]

    def parts_by_page(self) -> list[list[int]]:
        """The parts on each page: the groups while paged (one page a part until grouped)."""
        present = self.present()
        if sorted(i for page in self.groups for i in page) == present:
            return self.groups
        return [[i] for i in present]

    def page(self) -> int:
        """The number (from 0) of the page shown: the one holding the part turned to."""
        return next((k for k, parts in enumerate(self.parts_by_page()) if self.index in parts), 0)

    def go(self, index: int) -> None:
        """Turn to part ``index``'s page (kept within the parts; a part that is not there: the next that is)."""
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
        pages, k = self.parts_by_page(), self.page()
        if k + 1 < len(pages):
            self.go(pages[k + 1][0])

    def back(self) -> None:
        pages, k = self.parts_by_page(), self.page()
        if k > 0:
            self.go(pages[k - 1][0])

    def page_text(self) -> str:
        """The page bar's words: "The norm · page 2 of 13" for a page of one part, "Parts 1 to 3 of 13 ·
        page 1 of 6" for a page of several (their boxes hold their names, numbered)."""
        pages = self.parts_by_page()
        if self.index not in self.present():
            return ""
        k = self.page()
        return self._title_for(pages[k], k + 1, len(pages))

    def _title_for(self, parts: list[int], number: int, count: int) -> str:
        if len(parts) == 1:
            return f"{self.names[parts[0]]} · page {number} of {count}"
        present = self.present()
        first, last = present.index(parts[0]) + 1, present.index(parts[-1]) + 1
        return f"Parts {first} to {last} of {len(present)} · page {number} of {count}"

    def _sync(self) -> None:
        self.nav.setVisible(self.paged)
        present, pages, k = self.present(), self.parts_by_page(), self.page()
        shown = pages[k] if pages else []
        for i, box in enumerate(self.boxes):
            box.setHidden(self.blank or i not in present or (self.paged and i not in shown))
            self.column.setStretchFactor(box, 1 if self.paged and i in shown and self.fills[i] else 0)
        filled = self.paged and any(self.fills[i] for i in shown)
        self.column.setStretch(len(self.boxes), 0 if filled else 1)  # the blank below the parts: none under a filled page
        for number, i in enumerate(present, start=1):
            if not self.paged or (len(shown) > 1 and i in shown):
                title = f"{number} · {self.names[i]}"  # numbered, as the bar counts them: "Parts 1 to 3 of 13"
            else:
                title = ""  # a page of one part: the bar names it
            self.boxes[i].setTitle(title)
        self.title.setText(self.page_text())
        self.back_button.setEnabled(self.paged and bool(present) and k > 0)
        self.next_button.setEnabled(self.paged and bool(present) and k + 1 < len(pages))
        if self.paged:
            QTimer.singleShot(0, self._to_top)

    def _to_top(self) -> None:
        self.scroll.verticalScrollBar().setValue(0)

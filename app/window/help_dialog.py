"""The "?" button on every panel and the window that shows its explanation or the glossary."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QGroupBox, QTextBrowser, QToolButton, QVBoxLayout, QWidget

from app.window.guard import guarded
from app.logic.help import glossary_html


class CornerButton(QToolButton):
    """A small button in the top right corner of ``panel``'s title row, following its size and font;
    ``slot`` counts from the right (0: the corner itself)."""

    def __init__(self, panel: QWidget, text: str, tip: str, slot: int = 0):
        super().__init__(panel)
        self.slot = slot
        self.setText(text)
        self.setToolTip(tip)
        self.setAutoRaise(True)
        panel.installEventFilter(self)

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.FontChange, QEvent.Type.Show):
            self.setFont(watched.font())  # a style sheet (the "⋯"'s) keeps a button off its parent's font
            h = watched.fontMetrics().height() + 2
            self.setFixedSize(h + 6, h)
            self.move(watched.width() - (self.slot + 1) * (self.width() + 2), 0)
            self.raise_()
            if isinstance(watched, QGroupBox) and watched.title():  # the title keeps its room left of the buttons
                needs = getattr(watched, "_corner_needs", {})
                watched._corner_needs = needs
                needs[self.slot] = watched.fontMetrics().horizontalAdvance(watched.title()) + 16 + (self.slot + 1) * (self.width() + 2)
                # set only where the title asks more than the panel's own hint: a minimum set replaces the hint
                least = max(needs.values()) if max(needs.values()) > watched.minimumSizeHint().width() else 0
                if watched.minimumWidth() != least:
                    watched.setMinimumWidth(least)
        return False


class HelpButton(CornerButton):
    """A small "?" in the top right corner of ``panel``'s title row; ``clicked`` opens its help."""

    def __init__(self, panel: QWidget, on_click):
        super().__init__(panel, "?", "What am I looking at? (F1)")
        self.clicked.connect(on_click)


class HelpDialog(QDialog):
    """One panel's explanation, or the glossary (a link in every explanation leads there)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setAttribute(Qt.WA_WindowPropagation)  # a window of its own: takes the main window's font (projector mode) too
        self.result = None  # the SessionResult whose model the glossary speaks of (None: no model yet)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._on_browser_anchor_clicked)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)
        layout.addWidget(buttons)
        self.resize(560, 420)

    def show_text(self, title: str, rich_text: str) -> None:
        self.setWindowTitle(f"What am I looking at? {title}")
        self.browser.setHtml(rich_text)
        self.show()
        self.raise_()

    def show_glossary(self) -> None:
        """Every glossary entry in its variant for ``result``'s model (None: the entries no model decides)."""
        self.show_text("Glossary", glossary_html(self.result))
        self.setWindowTitle("Glossary")

    def _on_browser_anchor_clicked(self, url) -> None:
        if url.toString() == "glossary":
            self.show_glossary()

"""The "?" on every panel, F1 and the glossary: each panel explained with its current numbers."""

from __future__ import annotations

from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication, QWidget

from app.logic.help import panel_help
from app.window.help_dialog import HelpButton, HelpDialog


class PanelHelp:
    """Explains the panels ``keys`` names (panel -> its key in the help texts) from ``state``'s
    result, in one HelpDialog made on first use (``dialog``); ``buttons``: each panel's "?"."""

    def __init__(self, parent: QWidget, state, keys: dict):
        self.parent, self.state, self.keys = parent, state, keys
        self.dialog: HelpDialog | None = None
        self.buttons = {panel: HelpButton(panel, lambda _=False, p=panel: self.show(p)) for panel in keys}

    def show(self, panel: QWidget | None) -> None:
        """Explain ``panel`` with the current numbers (None: the glossary)."""
        if self.dialog is None:
            self.dialog = HelpDialog(self.parent)
        self.dialog.result = self.state.result  # the glossary (and the link to it) speaks of the model on screen
        if panel is None:
            self.dialog.show_glossary()
        else:
            title, text = panel_help(self.keys[panel], self.state.result, self.state.layer, self.state.head)
            self.dialog.show_text(title, text)

    def show_pointed(self) -> None:
        """F1: the panel under the mouse, else the one holding the keyboard focus, else the first shown."""
        for widget in (QApplication.widgetAt(QCursor.pos()), QApplication.focusWidget()):
            while widget is not None and widget not in self.keys:
                widget = widget.parentWidget()
            if widget is not None:
                self.show(widget)
                return
        shown = [p for p in self.keys if p.isVisible()]
        self.show(shown[0] if shown else next(iter(self.keys)))

"""The keys of Inside's pages: while Inside is in front as pages (projector mode, or a long page),
→ and Page Down turn to the next page, ← and Page Up to the one before, and the window's step and
back actions keep only Space (step), exactly as while the Flow's tour runs (``flow_view.TourMode``).
Anywhere else, and with Inside as one long page, the keys step as always."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence

from app.panels.inside_panel import InsidePanel


class InsidePageKeys(QObject):
    """Gives ← → Page Up Page Down to Inside's pages while they are in front (see the module docstring)."""

    def __init__(self, panel: InsidePanel, step_action: QAction, back_action: QAction, parent: QObject | None = None):
        super().__init__(parent)
        self.panel = panel
        self._actions = (step_action, back_action)
        self._saved = [a.shortcuts() for a in self._actions]
        self.active = False
        window = panel.window()
        self.next_action = self._action("Inside: next page", panel.pages.next, window)
        self.back_action = self._action("Inside: page before", panel.pages.back, window)
        panel.pagedChanged.connect(self._on_panel_paged_changed)

    def _action(self, text, slot, window) -> QAction:
        a = QAction(text, window)
        a.setShortcutContext(Qt.WindowShortcut)
        a.triggered.connect(slot)
        window.addAction(a)
        return a

    def sync(self, in_front: bool) -> None:
        """Take the keys when Inside is ``in_front`` as pages; give them back otherwise."""
        wanted = in_front and self.panel.paged
        if wanted == self.active:
            return
        self.active = wanted
        step, back = self._actions
        if wanted:
            step.setShortcuts([QKeySequence(Qt.Key_Space)])
            back.setShortcuts([])
            self.next_action.setShortcuts([QKeySequence(Qt.Key_Right), QKeySequence(Qt.Key_PageDown)])
            self.back_action.setShortcuts([QKeySequence(Qt.Key_Left), QKeySequence(Qt.Key_PageUp)])
        else:
            for action, keys in zip(self._actions, self._saved):
                action.setShortcuts(keys)
            self.next_action.setShortcuts([])
            self.back_action.setShortcuts([])

    def _on_panel_paged_changed(self, _paged: bool) -> None:
        self.sync(self.panel.isVisible())

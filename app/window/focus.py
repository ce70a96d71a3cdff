"""One panel shown alone, filling the window (View → Focus, Ctrl+1…, a double-click on its title)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtWidgets import QGroupBox, QStyle, QStyleOptionGroupBox, QWidget

from app.window.guard import guarded


class PanelFocus(QObject):
    """Shows the prompt panel (``tokens``) or one of the stage panels (``overview``, an OverviewPages) alone,
    or every panel (``focused`` None). ``layout`` holds tokens over overview; ``repaint()`` asks for
    the plots to be drawn again at their new size. Watches each panel's title for a double-click."""

    focusChanged = Signal(object)  # the panel now shown alone, or None: every panel

    def __init__(self, tokens, overview, layout, repaint, parent: QObject | None = None):
        super().__init__(parent)
        self.tokens, self.overview, self.layout, self.repaint = tokens, overview, layout, repaint
        self.focused: QWidget | None = None
        for panel in (tokens, *overview.panels()):
            panel.installEventFilter(self)

    def toggle(self, panel: QWidget | None) -> None:
        """Show ``panel`` alone, filling the window; the same panel again (or None): every panel."""
        if panel is None or panel is self.focused:
            panel = None
        self.focused = panel
        self.overview.setVisible(panel is not self.tokens)
        self.restore()
        self.focusChanged.emit(panel)
        self.overview.focus(None if panel is self.tokens else panel)
        self.repaint()

    def restore(self) -> None:
        """Show the prompt panel in the Overview as the focus wants it: alone and expanded, hidden
        behind another panel, or above every panel. While the Flow has it on loan (it is not in
        ``layout``) the Flow shows it as the Flow does, and calls this when it gives it back."""
        if self.layout.indexOf(self.tokens) < 0:
            return
        panel = self.focused
        self.tokens.setVisible(panel is None or panel is self.tokens)
        self.layout.setStretchFactor(self.tokens, 1 if panel is self.tokens else 0)
        self.tokens.set_expanded(panel is self.tokens)

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        """A double-click on a panel's title focuses that panel (and back)."""
        if event.type() == QEvent.Type.MouseButtonDblClick and isinstance(watched, QGroupBox):
            option = QStyleOptionGroupBox()
            watched.initStyleOption(option)
            title = watched.style().subControlRect(QStyle.CC_GroupBox, option, QStyle.SC_GroupBoxLabel, watched)
            if title.adjusted(-4, -4, 4, 4).contains(event.position().toPoint()):
                self.toggle(watched)
                return True
        return False

"""The one application state every panel subscribes to. Panels never call each other.

Selections (step, layer, head, token position, how many candidates to show, projector mode) live
here, together with the newest SessionResult. A panel changes a selection through a setter; every
panel interested hears the signal and redraws itself.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from .result import SessionResult
from .theme import NORMAL, PROJECTOR, Theme

LATEST = -1  # position: follow the newest query position


class AppState(QObject):
    """Selections shared by all panels, plus the newest result (``resultChanged``)."""

    resultChanged = Signal(object)  # SessionResult
    stepChanged = Signal(int)
    layerChanged = Signal(int)
    headChanged = Signal(int)
    positionChanged = Signal(int)  # a token position, or LATEST
    topNChanged = Signal(int)
    themeChanged = Signal(object)  # Theme

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.result: SessionResult | None = None
        self.step = -1
        self.layer = 0
        self.head = 0
        self.position = LATEST
        self.top_n = 10
        self.theme: Theme = NORMAL

    # ------------------------------------------------------------- the data
    def set_result(self, result: SessionResult) -> None:
        """Show ``result`` in every panel (the window's one per-step entry point)."""
        previous = self.result
        self.result = result
        if previous is None or previous.info is not result.info:
            self.layer = min(self.layer, result.n_layer - 1)
            self.head = min(self.head, result.n_head - 1)
            self.position = LATEST
        if self.position >= max(result.context_len, len(result.prompt_ids)):
            self.position = LATEST
        self.step = -1 if result.trace is None else result.trace.step
        self.resultChanged.emit(result)
        self.stepChanged.emit(self.step)

    @property
    def selected_position(self) -> int:
        """The token position the panels highlight: the chosen one, else the newest query."""
        if self.position != LATEST:
            return self.position
        if self.result is None:
            return -1
        return max(self.result.context_len, len(self.result.prompt_ids)) - 1

    # ------------------------------------------------------------ selections
    def set_layer(self, layer: int) -> None:
        layer = self._clamp(layer, self.result.n_layer if self.result else 1)
        if layer != self.layer:
            self.layer = layer
            self.layerChanged.emit(layer)

    def set_head(self, head: int) -> None:
        head = self._clamp(head, self.result.n_head if self.result else 1)
        if head != self.head:
            self.head = head
            self.headChanged.emit(head)

    def set_position(self, position: int) -> None:
        if position != self.position:
            self.position = position
            self.positionChanged.emit(position)

    def set_top_n(self, n: int) -> None:
        n = max(1, int(n))
        if n != self.top_n:
            self.top_n = n
            self.topNChanged.emit(n)

    def set_projector(self, on: bool) -> None:
        theme = PROJECTOR if on else NORMAL
        if theme is not self.theme:
            self.theme = theme
            self.themeChanged.emit(theme)

    @staticmethod
    def _clamp(value: int, count: int) -> int:
        return max(0, min(int(value), count - 1))

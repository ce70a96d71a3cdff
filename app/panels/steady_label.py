"""A word-wrapped label for text that changes every step, beside a plot.

A caption one line shorter than the last one shrank its label, the layout gave the line to the plot
next to it, and a resized plot lays out and repaints everything (axes, titles, items): one of the
longest turns of a step (26 ms measured during Play). This label only grows while its width stays
the same, so the plots keep their size after the first few steps.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from app.window.guard import guarded


class SteadyLabel(QLabel):
    """A word-wrapped QLabel whose height never shrinks while its width and font stay the same."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.setWordWrap(True)
        self._width = -1

    def setText(self, text: str) -> None:
        super().setText(text)
        self._hold()

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != self._width:  # other line breaks: start over
            self._width = event.size().width()
            self.setMinimumHeight(0)
            self._hold()

    @guarded
    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == event.Type.FontChange:  # projector mode: start over
            self.setMinimumHeight(0)
            self._hold()

    def start_over(self) -> None:
        """Forget the height held: the label moved to a place of another width (it holds again once resized)."""
        self._width = -1
        self.setMinimumHeight(0)

    def _hold(self) -> None:
        if self._width > 0:
            need = self.heightForWidth(self._width)
            if need > self.minimumHeight():
                self.setMinimumHeight(need)

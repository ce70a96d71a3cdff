"""Widgets whose one line of text is the first of its wordings (longest first) that fits their
width, whole (``app.logic.text_fit``), chosen again when they are resized or their font changes:
never cut with an ellipsis, never pushing the window wider."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QSizePolicy, QWidget

from app.logic.text_fit import fit
from app.window.guard import guarded


class _Refits:
    """Calls ``_refit`` after a resize and after a font change (mixed in before the Qt class)."""

    def _refit(self) -> None:
        raise NotImplementedError

    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._refit()

    @guarded
    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.FontChange:
            self._refit()


class FittedLabel(_Refits, QLabel):
    """A one-line label showing the first of its wordings that fits."""

    def __init__(self, wordings, parent: QWidget | None = None):
        super().__init__(parent)
        self.setTextFormat(Qt.PlainText)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.wordings = tuple(wordings)
        self._refit()

    def set_wordings(self, wordings) -> None:
        self.wordings = tuple(w for w in wordings if w)
        self._refit()

    def _refit(self) -> None:
        width = self.contentsRect().width()
        self.setText(fit(self.wordings, width, self.fontMetrics().horizontalAdvance)[0] if self.wordings else "")


class PlaceholderFitEdit(_Refits, QLineEdit):
    """A line editor whose grey placeholder is the first of its wordings that fits; the longest is
    its tooltip's first line, to read in full."""

    def __init__(self, wordings: tuple[str, ...], tip: str = "The system message, before the user's turn (the editor under it)"):
        super().__init__()
        self.tip = tip
        self.set_placeholders(wordings)

    def set_placeholders(self, wordings: tuple[str, ...]) -> None:
        self.wordings = wordings
        self.setToolTip(f"{wordings[0]}\n{self.tip}" if len(wordings) > 1 else self.tip)
        self._refit()

    def _refit(self) -> None:
        margins = self.textMargins()
        room = self.contentsRect().width() - margins.left() - margins.right() - 8  # the editor's own margin and frame
        self.setPlaceholderText(fit(self.wordings, room, self.fontMetrics().horizontalAdvance)[0])

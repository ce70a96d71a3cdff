"""A friendly note over a plot that has nothing to show yet, instead of meaningless axes."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QWidget

from app.window.guard import guarded

BEFORE_THE_FIRST_STEP = "Press Space (or Step ▶) to run the prompt through the model."


class EmptyNote(QLabel):
    """Covers ``view`` (a plot's widget) with ``text`` while ``show()``n; follows its size."""

    def __init__(self, view: QWidget, text: str = BEFORE_THE_FIRST_STEP):
        super().__init__(text, view)
        self.setAlignment(Qt.AlignCenter)
        self.setWordWrap(True)
        self.setTextFormat(Qt.PlainText)
        self.setStyleSheet("background: white; color: #555555; padding: 8px")
        self.setGeometry(view.rect())
        view.installEventFilter(self)

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.setGeometry(watched.rect())
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.Show, QEvent.Type.Resize):
            self.setFont(watched.font())  # its style sheet keeps it off its parent's font otherwise
        return False

"""The line under the views: what just happened (``status_label``), the model in use
(``model_label``) and the buttons a refusal offers."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy

from app.panels.fitted_text import FittedLabel
from app.window import theme as th
from app.window.guard import guarded

log = logging.getLogger(__name__)


MORE = " …"  # after the words of a message too long for the line (the whole of it is in the tooltip)


def head_words(text: str, room: float, measure) -> str:
    """``text`` if it fits ``room`` (``measure`` gives a text's width), else its first whole words and
    ``MORE``; ``MORE`` alone when not even the first word fits."""
    text = " ".join(text.split())
    if measure(text) <= room:
        return text
    words = text.split(" ")
    shown = ""
    for word in words:
        candidate = f"{shown} {word}" if shown else word
        if measure(candidate + MORE) > room:
            break
        shown = candidate
    return shown + MORE if shown else MORE.strip()


class OneLineLabel(QLabel):
    """A label that stays one line: ``text()`` is the whole message, drawn as its first words that fit
    (``head_words``); the whole message is its tooltip. A long error message never makes the line
    under the views two lines tall (which took the height from the views above it)."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.shorter: tuple[str, ...] = ()  # shorter forms of the message, longest first
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)

    def setText(self, text: str, shorter: tuple[str, ...] = ()) -> None:  # noqa: N802 - Qt's name
        self.shorter = tuple(shorter)
        super().setText(text)
        self.setToolTip(text)

    def shown(self) -> str:
        """What the line draws of ``text()`` at its width: the message, else its first shorter form
        that fits, else the shortest form's first words."""
        room, measure = self.contentsRect().width(), self.fontMetrics().horizontalAdvance
        forms = (self.text(), *self.shorter)
        return next((form for form in forms if measure(form) <= room), None) or head_words(forms[-1], room, measure)

    @guarded(fallback=lambda self: QSize())
    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.fontMetrics().horizontalAdvance(self.shown()), self.fontMetrics().height())

    @guarded(fallback=lambda self: QSize())
    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(0, self.fontMetrics().height())

    @guarded
    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        self.style().drawItemText(painter, self.contentsRect(), int(Qt.AlignLeft | Qt.AlignVCenter), self.palette(),
                                  self.isEnabled(), self.shown(), self.foregroundRole())
        painter.end()


class StatusLine(QObject):
    """Labels of one line that never widen the window (a QStatusBar's did: a long message widened it),
    ``truncate_button`` (shown while a too-long prompt is refused), ``restart_button`` (shown once
    the engine was not restarted by itself) and ``cancel_button`` (shown while a long prefill runs), in one row (``layout``: the window adds it under the
    views, a layout and not a widget of its own, so the labels wrap to the window's width)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.status_label = OneLineLabel("Starting…")
        self.model_label = FittedLabel(("no model loaded",))  # the first of its wordings that fits, on one line
        self.truncate_button = QPushButton("Keep only the last tokens that fit")
        self.truncate_button.setToolTip("The prompt is longer than the model reads: use only its end")
        self.truncate_button.hide()
        self.restart_button = QPushButton("Restart the model")
        self.restart_button.hide()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop reading the prompt: no step is taken, the prompt stays")
        self.cancel_button.hide()
        self.status_label.setTextFormat(Qt.PlainText)  # token text such as <|endoftext|> is text, not a tag
        self.model_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.layout = bar = QHBoxLayout()
        bar.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.status_label, 3)  # a step's line fits on one line at 1280 px, projector
        bar.addWidget(self.truncate_button)
        bar.addWidget(self.restart_button)
        bar.addWidget(self.cancel_button)
        bar.addWidget(self.model_label, 1)

    def say(self, text: str, *, error: bool = False, shorter: tuple[str, ...] = ()) -> None:
        """Show ``text`` (``error``: in the error style; ``shorter``: its shorter forms, for a narrow
        line) and log it."""
        self.status_label.setStyleSheet(f"color: {th.ERROR}; font-weight: bold" if error else "")
        self.status_label.setText(text, shorter)
        log.info("status: %s", text)

    def show_model(self, info) -> None:
        """``info`` (a ModelInfo) is the model in use: one calm line, the details in its tooltip."""
        if info.is_demo:  # what this model is for, and how to get a real one
            self.model_label.set_wordings(("Tiny demo model (Model → GPT-2 small)", "Tiny demo model"))
            self.model_label.setToolTip(
                f"{info.label}. It writes word salad; for real text: Model → GPT-2 small. GPT-2 small (124M) downloads once (about 550 MB) from the Model menu; for a "
                "classroom without a network, build the installer with packaging/build.py --model-dir to bundle it. "
                f"Runs on {info.runs_on}."
            )
        else:
            local_cpu = not info.remote_host and info.device == "cpu"
            where = "" if local_cpu else (" on " + (info.remote_host if info.remote_host else info.device))
            self.model_label.set_wordings((f"Model: {info.name}{where}", f"{info.name}{where}", info.name))
            self.model_label.setToolTip(f"{info.label}; runs on {info.runs_on}")

    def show_viewing(self, result) -> None:
        """A session opened from a file without its model is on screen."""
        self.model_label.set_wordings((f"Viewing a session made with {result.info.name} (not loaded)",
                                       f"Viewing {result.info.name} (not loaded)", f"{result.info.name} (not loaded)"))
        self.model_label.setToolTip(result.why_not)

    def set_theme(self, theme: th.Theme) -> None:
        for label in (self.status_label, self.model_label):
            label.setFont(theme.font(-1))

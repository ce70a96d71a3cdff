"""The line under the views: what just happened (``status_label``), the model in use
(``model_label``) and the buttons a refusal offers."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy

from app.panels.fitted_text import FittedLabel
from app.window import theme as th

log = logging.getLogger(__name__)


class StatusLine(QObject):
    """Labels that wrap (a QStatusBar's labels do not: a long message widened the whole window),
    ``truncate_button`` (shown while a too-long prompt is refused), ``restart_button`` (shown once
    the engine was not restarted by itself) and ``cancel_button`` (shown while a long prefill runs), in one row (``layout``: the window adds it under the
    views, a layout and not a widget of its own, so the labels wrap to the window's width)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.status_label = QLabel("Starting…")
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
        self.status_label.setWordWrap(True)
        self.status_label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.model_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.layout = bar = QHBoxLayout()
        bar.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.status_label, 3)  # a step's line fits on one line at 1280 px, projector
        bar.addWidget(self.truncate_button)
        bar.addWidget(self.restart_button)
        bar.addWidget(self.cancel_button)
        bar.addWidget(self.model_label, 1)

    def say(self, text: str, *, error: bool = False) -> None:
        """Show ``text`` (``error``: in the error style) and log it."""
        self.status_label.setStyleSheet(f"color: {th.ERROR}; font-weight: bold" if error else "")
        self.status_label.setText(text)
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

"""What the window does when its engine dies: the controller starts a fresh one (``engineRestarted``)
and the model shown is loaded again, or it stops after too many quick deaths (``engineStopped``)
and the person restarts it (``restart``: Run → Restart the model, or the status line's button)."""

from __future__ import annotations

from PySide6.QtCore import QObject

from app.logic import wording
from app.window.controller import QUICK_DEATH_S


class EngineRecovery(QObject):
    """Reloads the model shown into a fresh engine, and offers a restart when none was started."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        window.controller.engineRestarted.connect(self._on_controller_engine_restarted)
        window.controller.engineStopped.connect(self._on_controller_engine_stopped)

    def restart(self) -> None:
        """Start the model's process again after it stopped for good, and load the model shown."""
        w = self.window
        w.commands.restart_action.setEnabled(False)
        w.status_line.restart_button.hide()
        w.controller.restart_engine()
        self._reload_model()

    def _on_controller_engine_restarted(self, exit_code) -> None:
        """The model's process died and a fresh one started: load the model shown again (its steps
        are lost with the process; the prompt and the sampling settings are kept). A step of the
        dead process still waiting to be drawn is dropped, so the message stays until the new
        process is ready."""
        self.window.painter.drop_stale()
        self._reload_model()
        self.window.show_error(
            f"{wording.engine_died(exit_code)} Loading the model again: its steps were lost; the prompt and your sampling settings are kept."
        )

    def _reload_model(self) -> None:
        """Load the model shown again, with the editor's text, or with the prompt that last ran
        when the person emptied the editor (a fresh engine has no prompt of its own to keep)."""
        w = self.window
        result = w.state.result
        source = None if result is None or result.info.is_demo else result.info.source
        ran = "" if result is None else (result.chat.user if result.chat is not None else result.prompt_text)
        w.load_model(source, prompt=w.tokens.prompt() or ran, fallback=True)

    def _on_controller_engine_stopped(self, exit_code) -> None:
        from engine.logs import log_file

        w = self.window
        w.painter.drop_stale()
        w.commands.restart_action.setEnabled(True)
        w.status_line.restart_button.show()
        w.show_error(wording.engine_stopped(exit_code, w.controller.policy.quick_deaths, QUICK_DEATH_S, log_file()))

"""What the controller talks to, wherever the model runs: the signals both engines send.

``app.window.engine_process.EngineProcess`` (a child process, the default) and
``app.window.engine_thread.EngineThread`` (a worker thread, ``--engine thread``) both derive from
``Engine``, so the signal set is declared once. Imports no torch.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


class Engine(QObject):
    """Runs ``app.protocol.messages`` requests on a SessionHost somewhere else and sends every reply back
    through ``replied``, queued to the GUI thread."""

    replied = Signal(object)  # a protocol.Reply
    died = Signal(object)  # the exit code (int, or None): the engine ended without being asked to

    def submit(self, request) -> None:
        """Queue ``request`` (a ``protocol.Request``) behind the ones sent before it."""
        raise NotImplementedError

    def set_control(self, name: str, value: int) -> None:
        """Set one of ``protocol.CONTROLS`` on the host now, even while a request runs."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop the engine; blocks until it has."""
        raise NotImplementedError

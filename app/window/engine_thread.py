"""The session host on a worker QThread of the window's own process (``--engine thread``).

Simpler to debug and profile than the engine process (one process, one debugger), but the forward
pass shares the interpreter lock with the window's painting: both slow down while Play runs (see
benchmarks/RESULTS_GUI.md). Same interface as ``app.window.engine_process.EngineProcess``.
"""

from __future__ import annotations

import logging

import torch
from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from app.host import torch_threads
from app.window.engine_link import Engine
from app.protocol.messages import Request
from app.host.session_host import SessionHost

log = logging.getLogger(__name__)


class _Worker(QObject):
    """Lives on the worker thread: every request and every play step runs there, in order. Its
    replies go out through the EngineThread's ``replied`` (queued to the GUI thread)."""

    again = Signal(object)  # Request: a play loop's next step, queued back to this thread

    def __init__(self, replied):
        super().__init__()
        self.host = SessionHost(replied.emit, self.again.emit)
        self.again.connect(self.handle, Qt.QueuedConnection)

    @Slot()
    def on_thread_started(self) -> None:
        torch.set_num_threads(torch_threads.ENGINE_TORCH_THREADS)

    @Slot(object)
    def handle(self, request: Request) -> None:
        self.host.handle(request)


class EngineThread(Engine):
    """Runs a SessionHost on its own long-lived QThread; ``shutdown`` stops it. ``died`` is never
    emitted: a thread cannot die of an exception in a request."""

    _requested = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("nexttoken-session-worker")
        self._worker = _Worker(self.replied)
        self._worker.moveToThread(self.thread)
        self._requested.connect(self._worker.handle)  # queued: the worker lives on another thread
        self.thread.started.connect(self._worker.on_thread_started)  # runs on the worker thread
        self.thread.finished.connect(self._worker.deleteLater)
        self.thread.start()

    @property
    def host(self) -> SessionHost:
        """The session host (tests inspect its session; never call it from this thread)."""
        return self._worker.host

    def submit(self, request: Request) -> None:
        self._requested.emit(request)

    def set_control(self, name: str, value: int) -> None:
        """Set one of ``protocol.CONTROLS`` on the host now, even while a request runs."""
        self.host.set_control(name, value)

    def shutdown(self, grace_s: float = 0.0) -> None:
        """Stop the thread after the request it is running (if any), then wait for the session files
        being written; blocks until both have (``grace_s``: the process engine's, unused here)."""
        self.host.play_generation = 0
        self.host.cancelled = True  # a download in progress stops at its next progress report
        if self.thread.isRunning():
            self.thread.quit()
            if not self.thread.wait(60_000):  # a model download can hold it; never destroy it running
                log.warning("the worker thread is still busy after 60 s; waiting for it")
                self.thread.wait()
        self.host.close()

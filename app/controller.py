"""The GUI-thread side of the worker: numbers requests, keeps one in flight, drops stale results.

Pure Qt plumbing, no drawing: the window connects ``resultReady``, ``errorOccurred``, ``busyChanged``
and ``downloadProgress`` to what it shows.

Coalescing: only one request runs at a time. While it runs, further requests wait here, and a new
request of the same kind as the last waiting one replaces it (a held-down Step key queues one step,
not hundreds; dragging the temperature re-samples with the newest value only). A reset, prompt or
load drops everything waiting and makes any result of an older request stale.
"""

from __future__ import annotations

import atexit
import logging
import weakref

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal

from .worker import Request, SessionWorker

log = logging.getLogger(__name__)

RESTARTS = {"load", "prompt", "reset"}  # requests after which older results are stale
REPLACEABLE = {"step", "resample", "choose", "back"}


class SessionController(QObject):
    """Sends requests to the SessionWorker on its QThread and hands back the newest results."""

    requested = Signal(object)  # Request, queued to the worker thread
    resultReady = Signal(object)  # SessionResult, not stale
    errorOccurred = Signal(str, str)  # request kind, message
    busyChanged = Signal(bool)
    downloadProgress = Signal("qint64", "qint64")  # bytes done, bytes total (models pass 2 GiB)
    modelLoaded = Signal(object)  # ModelInfo

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._generation = 0
        self._barrier = 0  # results of requests older than this are stale
        self._in_flight: Request | None = None
        self._waiting: list[Request] = []
        self._busy_shown = False
        self.forward_requests = 0  # step requests sent to the worker (tests and benchmarks read it)
        self.thread = QThread()
        self.thread.setObjectName("nexttoken-session-worker")
        self.worker = SessionWorker()
        self.worker.moveToThread(self.thread)
        self.requested.connect(self.worker.handle)  # queued: the worker lives on another thread
        self.worker.finished.connect(self._on_worker_finished)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.progress.connect(self.downloadProgress)
        self.thread.started.connect(self.worker.on_thread_started)  # runs on the worker thread
        self.thread.finished.connect(self.worker.deleteLater)
        self.thread.start()
        # Stop the thread however the program ends, also when a window is never closed: Qt aborts
        # the process if a QThread object is destroyed while its thread still runs.
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        atexit.register(_shutdown_at_exit, weakref.ref(self))

    # ------------------------------------------------------------- requests
    @property
    def busy(self) -> bool:
        return self._in_flight is not None

    @property
    def idle(self) -> bool:
        return self._in_flight is None and not self._waiting

    def load(self, source: str | None = None, *, loaded=None, fallback: bool = False, prompt: str = "") -> int:
        return self._request("load", {"source": source, "loaded": loaded, "fallback": fallback, "prompt": prompt})

    def set_prompt(self, text: str, truncate: bool = False) -> int:
        """Use ``text`` as the prompt; too long is an error unless ``truncate`` keeps its last tokens."""
        return self._request("prompt", (text, True) if truncate else text)

    def step(self) -> int:
        return self._request("step")

    def play(self) -> int:
        """Step over and over until ``stop_play`` or any other request, as fast as the model runs: the
        worker queues each next step itself, so it never waits for the window to draw a result."""
        return self._request("play")

    def stop_play(self) -> None:
        self.worker.play_generation = 0

    @property
    def looping(self) -> bool:
        """True while a play loop runs (or is about to)."""
        return self.worker.play_generation != 0

    def back(self) -> int:
        return self._request("back")

    def choose(self, token_id: int) -> int:
        return self._request("choose", int(token_id))

    def resample(self, settings) -> int:
        return self._request("resample", settings)

    def reset(self) -> int:
        return self._request("reset")

    def _request(self, kind: str, payload=None) -> int:
        self._generation += 1
        request = Request(kind, self._generation, payload)
        self.worker.play_generation = request.generation if kind == "play" else 0  # any request ends a loop
        if kind in RESTARTS:
            self._barrier = request.generation
            self.worker.latest_barrier = request.generation
            self._waiting = [r for r in self._waiting if r.kind == "load"] if kind != "load" else []
        elif kind in REPLACEABLE and self._waiting and self._waiting[-1].kind == kind and kind != "back":
            self._waiting[-1] = request
            return request.generation
        self._waiting.append(request)
        self._dispatch()
        return request.generation

    def _dispatch(self) -> None:
        if self._in_flight is not None or not self._waiting:
            return
        self._in_flight = self._waiting.pop(0)
        if self._in_flight.kind == "step":
            self.forward_requests += 1
        self.requested.emit(self._in_flight)
        self._sync_busy()

    def _sync_busy(self) -> None:
        if self.busy != self._busy_shown:
            self._busy_shown = self.busy
            self.busyChanged.emit(self.busy)

    def _finish(self, generation: int) -> bool:
        """Mark the in-flight request done; True if its result is still wanted."""
        if self._in_flight is not None and self._in_flight.generation == generation:
            self._in_flight = None
        self._dispatch()
        self._sync_busy()
        return generation >= self._barrier

    # -------------------------------------------------------------- results
    def _on_worker_finished(self, result) -> None:
        if not self._finish(result.generation):
            log.debug("dropping stale %s result %d", result.kind, result.generation)
            return
        if result.kind == "load":
            self.modelLoaded.emit(result.info)
        self.resultReady.emit(result)

    def _on_worker_failed(self, generation: int, kind: str, message: str) -> None:
        if not self._finish(generation) or kind == "skipped":
            return
        log.info("%s failed: %s", kind, message)
        self.errorOccurred.emit(kind, message)
        if kind == "load" and self.worker.session is not None:
            # The load made results in flight stale; show the session it left untouched as it is now.
            self._request("refresh")

    # ------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Stop the worker thread after the request it is running (if any); blocks until it has."""
        self._waiting.clear()
        self.stop_play()
        self.worker.cancelled = True  # a download in progress stops at its next progress report
        if self.thread.isRunning():
            self.thread.quit()
            if not self.thread.wait(60_000):  # a model download can hold it; never destroy it running
                log.warning("the worker thread is still busy after 60 s; waiting for it")
                self.thread.wait()


def _shutdown_at_exit(ref: "weakref.ref[SessionController]") -> None:
    controller = ref()
    if controller is None:
        return
    try:
        controller.shutdown()
    except RuntimeError:  # its Qt objects are already deleted: their thread was stopped with them
        pass

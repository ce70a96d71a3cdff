"""The GUI-thread side of the engine: numbers requests, keeps one in flight, drops stale results.

Pure Qt plumbing, no drawing: the window connects ``resultReady``, ``errorOccurred``, ``busyChanged``
and ``downloadProgress`` to what it shows. The engine runs the requests elsewhere: in a child
process (``app.engine_process``, the default) or on a worker thread (``app.engine_thread``); both
have the same interface, so nothing here depends on which.

Coalescing: only one request runs at a time. While it runs, further requests wait here, and a new
request of the same kind as the last waiting one replaces it (a held-down Step key queues one step,
not hundreds; dragging the temperature re-samples with the newest value only). A reset, prompt or
load drops everything waiting and makes any result of an older request stale.
"""

from __future__ import annotations

import atexit
import logging
import weakref

from PySide6.QtCore import QCoreApplication, QObject, Signal

from .worker import Request

log = logging.getLogger(__name__)

RESTARTS = {"load", "prompt", "reset"}  # requests after which older results are stale
REPLACEABLE = {"step", "resample", "choose", "back"}
ENGINES = ("process", "thread")


def start_engine(kind: str, parent: QObject):
    """An EngineProcess ("process") or an EngineThread ("thread"), started."""
    if kind == "process":
        from .engine_process import EngineProcess

        return EngineProcess(parent)
    if kind == "thread":
        from .engine_thread import EngineThread

        return EngineThread(parent)
    raise ValueError(f"unknown engine {kind!r}: use one of {', '.join(ENGINES)}")


class SessionController(QObject):
    """Sends requests to the engine (``engine``: "process" or "thread") and hands back the newest results."""

    resultReady = Signal(object)  # SessionResult, not stale
    errorOccurred = Signal(str, str)  # request kind, message
    busyChanged = Signal(bool)
    downloadProgress = Signal("qint64", "qint64")  # bytes done, bytes total (models pass 2 GiB)
    modelLoaded = Signal(object)  # ModelInfo
    engineRestarted = Signal(str)  # the engine died and a fresh one (no model loaded) replaced it: why

    def __init__(self, parent: QObject | None = None, engine: str = "process"):
        super().__init__(parent)
        self._generation = 0
        self._barrier = 0  # results of requests older than this are stale
        self._in_flight: Request | None = None
        self._waiting: list[Request] = []
        self._busy_shown = False
        self._play_generation = 0  # the play loop wanted (0 = none), mirrored in the engine
        self._has_session = False  # a load has succeeded in the running engine
        self._closed = False
        self.forward_requests = 0  # step requests sent to the engine (tests and benchmarks read it)
        self.engine_kind = engine
        self.engine = self._start_engine()
        # Stop the engine however the program ends, also when a window is never closed: Qt aborts
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
        self._set_play_generation(0)

    def _set_play_generation(self, generation: int) -> None:
        if generation != self._play_generation:
            self._play_generation = generation
            self.engine.set_play_generation(generation)

    @property
    def looping(self) -> bool:
        """True while a play loop runs (or is about to)."""
        return self._play_generation != 0

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
        self._set_play_generation(request.generation if kind == "play" else 0)  # any request ends a loop
        if kind in RESTARTS:
            self._barrier = request.generation
            self.engine.set_latest_barrier(request.generation)
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
        self.engine.submit(self._in_flight)
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
    def _on_engine_finished(self, result) -> None:
        if result.kind == "load":
            self._has_session = True
        if not self._finish(result.generation):
            log.debug("dropping stale %s result %d", result.kind, result.generation)
            return
        if result.kind == "load":
            self.modelLoaded.emit(result.info)
        self.resultReady.emit(result)

    def _on_engine_failed(self, generation: int, kind: str, message: str) -> None:
        if not self._finish(generation) or kind == "skipped":
            return
        log.info("%s failed: %s", kind, message)
        self.errorOccurred.emit(kind, message)
        if kind == "load" and self._has_session:
            # The load made results in flight stale; show the session it left untouched as it is now.
            self._request("refresh")

    def _on_engine_died(self, message: str) -> None:
        """The engine process ended (killed, out of memory, a crash in native code): start a fresh
        one. Everything it held is gone, so every result in flight is stale."""
        if self._closed:
            return
        old = self.engine
        old.shutdown()
        old.deleteLater()
        self._waiting.clear()
        self._in_flight = None
        self._play_generation = 0
        self._has_session = False
        self._barrier = self._generation + 1
        self.engine = self._start_engine()
        self._sync_busy()
        self.engineRestarted.emit(message)

    def _start_engine(self):
        engine = start_engine(self.engine_kind, self)
        engine.finished.connect(self._on_engine_finished)
        engine.failed.connect(self._on_engine_failed)
        engine.progress.connect(self.downloadProgress)
        engine.died.connect(self._on_engine_died)
        return engine

    # ------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Stop the engine (see its ``shutdown``); blocks until it has. Safe to call twice."""
        self._closed = True
        self._waiting.clear()
        self._play_generation = 0
        self.engine.shutdown()


def _shutdown_at_exit(ref: "weakref.ref[SessionController]") -> None:
    controller = ref()
    if controller is None:
        return
    try:
        controller.shutdown()
    except RuntimeError:  # its Qt objects are already deleted: their thread was stopped with them
        pass

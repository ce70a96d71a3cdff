"""The GUI-thread side of the engine: numbers requests, keeps one in flight, drops stale results.

Pure Qt plumbing, no drawing: the window connects ``resultReady``, ``errorOccurred``, ``busyChanged``
and ``downloadProgress`` to what it shows. The engine runs the requests (``app.protocol``)
elsewhere: in a child process (``app.engine_process``, the default) or on a worker thread
(``app.engine_thread``); both have the same interface, so nothing here depends on which.

Coalescing: only one request runs at a time. While it runs, further requests wait here, and a new
Step, Resample or Choose replaces one of its kind still waiting last (a held-down Step key queues
one step, not hundreds; dragging the temperature re-samples with the newest value only). A Load,
SetPrompt or Reset drops everything waiting (but a load) and makes any result of an older request
stale.

The sampling settings the person chose last live here (``settings``): every request that can
reach a fresh or reloaded engine carries them, so the engine never uses settings the window does
not show, also after the engine process died and was replaced.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from dataclasses import replace
from time import monotonic

from PySide6.QtCore import QCoreApplication, QObject, Signal

from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import SamplingSettings

from . import protocol as p

log = logging.getLogger(__name__)

ENGINES = ("process", "thread")
SAVE_GRACE_S = 600.0  # how long quitting waits for a session file being written before stopping the engine
QUICK_DEATH_S = 20.0  # an engine that dies sooner than this after it started died "quickly"
MAX_QUICK_DEATHS = 3  # after this many quick deaths in a row, stop restarting and ask the person


def start_engine(kind: str, parent: QObject):
    """An EngineProcess ("process") or an EngineThread ("thread"), started."""
    if kind == "process":
        from .engine_process import EngineProcess

        return EngineProcess(parent)
    if kind == "thread":
        from .engine_thread import EngineThread  # imports torch: only with --engine thread

        return EngineThread(parent)
    raise ValueError(f"unknown engine {kind!r}: use one of {', '.join(ENGINES)}")


class SessionController(QObject):
    """Sends requests to the engine (``engine``: "process" or "thread") and hands back the newest results."""

    resultReady = Signal(object)  # SessionResult, not stale
    insideReady = Signal(object)  # InsideResult, the answer to ``inspect``, not stale
    errorOccurred = Signal(str, str)  # request kind, message
    busyChanged = Signal(bool)
    downloadProgress = Signal("qint64", "qint64")  # bytes done, bytes total (models pass 2 GiB)
    modelLoaded = Signal(object)  # ModelInfo
    engineRestarted = Signal(str)  # the engine died and a fresh one (no model loaded) replaced it: why
    engineStopped = Signal(str)  # the engine died quickly too often: no new one was started; why
    noticed = Signal(str)  # a message for the status line from a result that is otherwise stale

    def __init__(self, parent: QObject | None = None, engine: str = "process"):
        super().__init__(parent)
        self.settings: SamplingSettings = DEFAULT_SETTINGS  # what the person chose last
        self.use_cache = True  # likewise: generate with the KV cache
        self._generation = 0
        self._barrier = 0  # results of requests older than this are stale
        self._in_flight: p.Request | None = None
        self._waiting: list[p.Request] = []
        self._busy_shown = False
        self._play_generation = 0  # the play loop wanted (0 = none), mirrored in the engine
        self._has_session = False  # a load has succeeded in the running engine
        self._closed = False
        self._dead_barrier = 0  # requests older than this went to an engine that has died
        self._quick_deaths = 0
        self.saves_pending = 0  # Saves sent whose file is not yet written (quitting waits for them)
        self.forward_requests = 0  # step requests sent to the engine (tests and benchmarks read it)
        self.engine_kind = engine
        self.engine = None
        self._start_engine()
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

    @property
    def stopped(self) -> bool:
        """True after the engine died quickly too often: nothing runs until ``restart_engine``."""
        return self.engine is None and not self._closed

    def load(self, source: str | None = None, *, loaded=None, fallback: bool = False, prompt: str = "") -> int:
        return self._request(
            p.Load(source=source, prompt=prompt, fallback=fallback, settings=self.settings, use_cache=self.use_cache, loaded=loaded)
        )

    def set_prompt(self, text: str, truncate: bool = False) -> int:
        """Use ``text`` as the prompt; too long is an error unless ``truncate`` keeps its last tokens."""
        return self._request(p.SetPrompt(text=text, truncate=truncate, settings=self.settings))

    def set_settings(self, settings: SamplingSettings) -> int:
        """The person chose ``settings``: use them from now on and re-draw the current step."""
        self.settings = settings
        return self._request(p.Resample(settings=settings))

    def set_use_cache(self, on: bool) -> int:
        """Generate with the KV cache or without it, from the next step on (kept across reloads)."""
        self.use_cache = bool(on)
        return self._request(p.SetCache(on=self.use_cache))

    def step(self) -> int:
        return self._request(p.Step())

    def play(self) -> int:
        """Step over and over until ``stop_play`` or any other request, as fast as the model runs: the
        engine queues each next step itself, so it never waits for the window to draw a result."""
        return self._request(p.Play())

    def stop_play(self) -> None:
        self._set_play_generation(0)

    @property
    def looping(self) -> bool:
        """True while a play loop runs in the engine (or is about to)."""
        return self._play_generation != 0

    def back(self) -> int:
        return self._request(p.Back())

    def choose(self, token_id: int) -> int:
        return self._request(p.Choose(token_id=int(token_id)))

    def reset(self) -> int:
        return self._request(p.Reset(settings=self.settings))

    def switch(self, node: int) -> int:
        """Show the branch through tree ``node`` as it was (see ``engine.branches``)."""
        return self._request(p.Switch(node=int(node)))

    def save_session(self, path: str) -> int:
        return self._request(p.SaveSession(path=str(path)))

    def open_session(self, path: str, step: int = -1) -> int:
        """Open the session saved in ``path`` at ``step`` (-1: where it was saved); it brings its settings."""
        return self._request(p.OpenSession(path=str(path), step=int(step), use_cache=self.use_cache, settings=self.settings))

    def inspect(self, step: int = -1, position: int = -1, layer: int = 0) -> int:
        """Ask for everything on the path at ``position`` of ``step`` (``insideReady`` answers)."""
        return self._request(p.Inspect(step=step, position=position, layer=layer))

    def cancel_load(self) -> int:
        """Stop the download of the Load that runs (the person pressed Cancel): it fails with "Download
        cancelled: still using <model>." and the session it would have replaced stays. Returns that
        Load's generation (0: no Load runs)."""
        if not isinstance(self._in_flight, p.Load) or self.engine is None:
            return 0
        self.engine.set_control("cancel_load", self._in_flight.generation)
        return self._in_flight.generation

    def refresh(self) -> int:
        """Ask for the session as it stands (nothing changes)."""
        return self._request(p.Refresh())

    def is_current(self, result) -> bool:
        """False once ``result`` is stale: a newer restart, or the engine that made it has died."""
        return result.generation >= self._barrier

    def _request(self, request: p.Request) -> int:
        self._generation += 1
        request = replace(request, generation=self._generation)
        if self.engine is None:
            self.errorOccurred.emit(request.kind, self._stopped_message)
            return request.generation
        if not isinstance(request, p.Inspect):  # any other request ends a play loop
            self._set_play_generation(request.generation if isinstance(request, p.Play) else 0)
        if isinstance(request, p.RESTARTS):
            self._barrier = request.generation
            self.engine.set_control("latest_barrier", request.generation)
            keep = tuple(k for k in p.KEPT_ON_RESTART if not isinstance(request, k))  # a newer Load replaces a waiting one
            self._waiting = [r for r in self._waiting if isinstance(r, keep)]
        elif isinstance(request, p.COALESCING) and self._waiting and type(self._waiting[-1]) is type(request):
            self._waiting[-1] = request
            return request.generation
        if isinstance(request, p.SaveSession):
            self.saves_pending += 1
        self._waiting.append(request)
        self._dispatch()
        return request.generation

    def _set_play_generation(self, generation: int) -> None:
        if generation != self._play_generation:
            self._play_generation = generation
            if self.engine is not None:
                self.engine.set_control("play_generation", generation)

    def _dispatch(self) -> None:
        if self._in_flight is not None or not self._waiting or self.engine is None:
            return
        self._in_flight = self._waiting.pop(0)
        if isinstance(self._in_flight, (p.Step, p.Play)):
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
    # A dead engine's results, failures and skips that were queued before its death was known are
    # all older than the barrier its death set, so they count as stale below.
    def _on_engine_finished(self, result) -> None:
        if result.kind == "save":  # the file is written (a "saving" result came first)
            self.saves_pending = max(0, self.saves_pending - 1)
        current = self._finish(result.generation)
        if result.kind in ("load", "open") and (current or result.generation >= self._dead_barrier):
            self._has_session = True  # this engine has a session (even if a newer request made it stale)
            self._quick_deaths = 0  # and it works
        if not current:
            log.debug("dropping stale %s result %d", result.kind, result.generation)
            if result.kind == "save":  # what it shows is stale; that the file was written is not
                self.noticed.emit(result.message)
            return
        if result.kind == "open":  # a reopened session brings its own settings: they are the person's now
            self.settings = result.settings
        if result.kind == "load" or (result.kind == "open" and result.can_step):  # a view-only session: no model
            self.modelLoaded.emit(result.info)
        self.resultReady.emit(result)

    def _on_engine_failed(self, generation: int, kind: str, message: str) -> None:
        if kind == "save":
            self.saves_pending = max(0, self.saves_pending - 1)
        if not self._finish(generation):
            return
        log.info("%s failed: %s", kind, message)
        self.errorOccurred.emit(kind, message)
        if kind in ("load", "open") and self._has_session:
            # The load (or the file refused) made results in flight stale; show the session it left
            # untouched as it is now.
            self.refresh()

    def _on_engine_inspected(self, generation: int, answer) -> None:
        if self._finish(generation):
            self.insideReady.emit(answer)

    def _on_engine_skipped(self, generation: int) -> None:
        self._finish(generation)

    def _on_engine_died(self, message: str) -> None:
        """The engine process ended (killed, out of memory, a crash in native code): start a fresh
        one, unless engines keep dying right after they start. Everything it held is gone, so
        every result in flight is stale."""
        if self._closed or self.engine is None:
            return
        old, lived = self.engine, monotonic() - self._engine_started
        old.shutdown()
        old.deleteLater()
        self.engine = None
        self._waiting.clear()
        self._in_flight = None
        self._play_generation = 0
        self._has_session = False
        self.saves_pending = 0  # a file it was writing is gone (the old one, if any, is whole)
        self._barrier = self._dead_barrier = self._generation + 1
        self._quick_deaths = self._quick_deaths + 1 if lived < QUICK_DEATH_S else 0
        self._sync_busy()
        if self._quick_deaths >= MAX_QUICK_DEATHS:
            from .logs import log_file

            where = log_file()
            self._stopped_message = (
                f"{message} The model's process stopped {self._quick_deaths} times in a row, each within "
                f"{QUICK_DEATH_S:.0f} s of starting, so it was not started again. "
                + (f"Details are in the log file {where}. " if where else "")
                + "Use Model → Restart the model to try again."
            )
            log.error("%s", self._stopped_message)
            self.engineStopped.emit(self._stopped_message)
            return
        self._start_engine()
        self.engineRestarted.emit(message)

    def restart_engine(self) -> None:
        """Start a fresh engine after ``engineStopped`` (the person asked to try again)."""
        if self.engine is None and not self._closed:
            self._quick_deaths = 0
            self._start_engine()

    def _start_engine(self) -> None:
        engine = start_engine(self.engine_kind, self)
        engine.finished.connect(self._on_engine_finished)
        engine.failed.connect(self._on_engine_failed)
        engine.skipped.connect(self._on_engine_skipped)
        engine.inspected.connect(self._on_engine_inspected)
        engine.progress.connect(self.downloadProgress)
        engine.died.connect(self._on_engine_died)
        self.engine, self._engine_started = engine, monotonic()

    _stopped_message = "The model's process is stopped."

    # ------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Stop the engine (see its ``shutdown``); blocks until it has, and until the session files
        being written are (``saves_pending``). Safe to call twice."""
        self._closed = True
        self._waiting.clear()
        self._play_generation = 0
        if self.engine is not None and self.saves_pending:
            self.engine.shutdown(SAVE_GRACE_S)
        elif self.engine is not None:
            self.engine.shutdown()


def _shutdown_at_exit(ref: "weakref.ref[SessionController]") -> None:
    controller = ref()
    if controller is None:
        return
    try:
        controller.shutdown()
    except RuntimeError:  # its Qt objects are already deleted: their thread was stopped with them
        pass

"""The GUI-thread side of the engine: adapts the request policy (``app.logic.request_policy``: one in
flight, coalescing, stale results, quick deaths) to Qt signals.

Qt plumbing, no drawing and no words: the window connects ``resultReady``, ``failed``,
``busyChanged`` and ``downloadProgress`` to what it shows. The engine runs the requests
(``app.protocol.messages``) elsewhere: in a child process (``app.window.engine_process``, the default) or on a
worker thread (``app.window.engine_thread``); both are an ``app.window.engine_link.Engine``, so nothing here
depends on which.

The sampling settings the person chose last live here (``settings``): every request that can
reach a fresh or reloaded engine carries them, so the engine never uses settings the window does
not show, also after the engine process died and was replaced. Until the person chooses any
(``settings_chosen``) requests carry None: each model loaded starts with its own
(its ``generation_config.json``'s), which ``settings`` then holds.
"""

from __future__ import annotations

import atexit
import logging
import weakref

from PySide6.QtCore import QCoreApplication, QObject, Signal

from engine.chat import ChatTurn
from engine.defaults import DEFAULT_SETTINGS
from engine.runtime import CPU
from engine.sampling import SamplingSettings

from app.protocol import messages as p
from app.logic.request_policy import MAX_QUICK_DEATHS, QUICK_DEATH_S, RequestPolicy, Verdict

log = logging.getLogger(__name__)

ENGINES = ("process", "thread")
SAVE_GRACE_S = 600.0  # how long quitting waits for a session file being written before stopping the engine
__all__ = ["ENGINES", "MAX_QUICK_DEATHS", "QUICK_DEATH_S", "SessionController", "start_engine"]


def start_engine(kind: str, parent: QObject):
    """An EngineProcess ("process") or an EngineThread ("thread"), started."""
    if kind == "process":
        from app.window.engine_process import EngineProcess

        return EngineProcess(parent)
    if kind == "thread":
        from app.window.engine_thread import EngineThread  # imports torch: only with --engine thread

        return EngineThread(parent)
    raise ValueError(f"unknown engine {kind!r}: use one of {', '.join(ENGINES)}")


class SessionController(QObject):
    """Sends requests to the engine (``engine``: "process" or "thread") and hands back the newest replies."""

    resultReady = Signal(object)  # SessionResult, not stale
    insideReady = Signal(object)  # InsideResult, the answer to ``inspect``, not stale
    attributionReady = Signal(object)  # AttributionResult, the answer to ``attribute``, not stale
    mapReady = Signal(object)  # MapResult, the answer to ``attention_map``, not stale
    tokenizedReady = Signal(object)  # TokensResult, the answer to ``tokenize``, not stale
    patchReady = Signal(object)  # PatchResult, the answer to ``patch``, not stale
    patchProgress = Signal(int, int)  # a Patch: layers done, layers
    compareReady = Signal(object)  # CompareResult, the answer to ``compare``, not stale
    failed = Signal(object)  # protocol.Failed (a kind of it), not stale
    busyChanged = Signal(bool)
    downloadProgress = Signal("qint64", "qint64")  # bytes done, bytes total (models pass 2 GiB)
    prefillProgress = Signal(int, int)  # a long prefill: blocks done, blocks
    modelLoaded = Signal(object)  # SessionResult: a Load's, or the first drawn of another model the engine holds
    engineRestarted = Signal(object)  # the engine died (its exit code) and a fresh one (no model loaded) replaced it
    engineStopped = Signal(object)  # the engine (exit code) died quickly too often: no new one was started
    noticed = Signal(object)  # SessionResult: stale, but its news is not (a Save's file was written)

    def __init__(self, parent: QObject | None = None, engine: str = "process"):
        super().__init__(parent)
        self.settings: SamplingSettings = DEFAULT_SETTINGS  # what the person chose last, else the model's own
        self.settings_chosen = False  # the person changed a setting (or opened a session file): theirs win
        self.use_cache = True  # likewise: generate with the KV cache
        self.runtime = CPU  # where each load runs the model and what records its steps (engine.runtime)
        self.stop_sequences: tuple[str, ...] = ()  # likewise: where generation stops (``set_stops``)
        self._model_asked = False  # a Load or an OpenSession was sent: the engine holds a session, or will
        self._model_shown = None  # the ModelInfo of the model modelLoaded named last
        self.policy = RequestPolicy(self._send, self._control)
        self._busy_shown = False
        self._closed = False
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
        return self.policy.busy

    @property
    def idle(self) -> bool:
        return self.policy.idle

    @property
    def stopped(self) -> bool:
        """True after the engine died quickly too often: nothing runs until ``restart_engine``."""
        return self.engine is None and not self._closed

    @property
    def sent(self) -> int:
        """The number of the newest request (its ``generation``); 0 before any."""
        return self.policy.generation

    @property
    def forward_requests(self) -> int:
        """Step and Play requests sent to the engine (tests and benchmarks read it)."""
        return self.policy.forward_requests

    def load(self, source: str | None = None, *, loaded=None, fallback: bool = False, prompt: str = "", chat: ChatTurn | None = None) -> int:
        """Load a model with ``prompt``, a user turn through its chat template when ``chat`` (its system message) is given."""
        self._model_asked = True
        return self._request(
            p.Load(source=source, prompt=prompt, fallback=fallback, settings=self._sent_settings(), use_cache=self.use_cache, loaded=loaded,
                   chat=chat, stop_sequences=self.stop_sequences, runtime=self.runtime)
        )

    def set_prompt(self, text: str, truncate: bool = False) -> int:
        """Use ``text`` as the prompt; too long is an error unless ``truncate`` keeps its last tokens."""
        return self._request(p.SetPrompt(text=text, truncate=truncate, settings=self._sent_settings()))

    def set_chat(self, turn: ChatTurn) -> int:
        """Use ``turn`` (system and user messages) through the model's chat template as the prompt."""
        return self._request(p.SetChat(turn=turn, settings=self._sent_settings()))

    def set_stops(self, sequences) -> int:
        """Stop generating once the text reaches one of ``sequences`` (kept across reloads: every Load
        carries them). Before the first model is asked for they are only kept (returns 0): the first
        Load takes them to the engine, which holds no session to give them to yet."""
        self.stop_sequences = tuple(sequences)
        if not self._model_asked:
            return 0
        return self._request(p.SetStops(sequences=self.stop_sequences))

    def _sent_settings(self) -> SamplingSettings | None:
        """What a request carries: the person's settings, or None (the session's own) before they chose any."""
        return self.settings if self.settings_chosen else None

    def set_settings(self, settings: SamplingSettings) -> int:
        """The person chose ``settings``: use them from now on and re-draw the current step."""
        self.settings, self.settings_chosen = settings, True
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
        self.policy.set_play(0)

    @property
    def looping(self) -> bool:
        """True while a play loop runs in the engine (or is about to)."""
        return self.policy.play_generation != 0

    def back(self) -> int:
        return self._request(p.Back())

    def choose(self, token_id: int) -> int:
        return self._request(p.Choose(token_id=int(token_id)))

    def reset(self) -> int:
        return self._request(p.Reset(settings=self._sent_settings()))

    def switch(self, node: int) -> int:
        """Show the branch through tree ``node`` as it was (see ``engine.branches``)."""
        return self._request(p.Switch(node=int(node)))

    def save_session(self, path: str) -> int:
        return self._request(p.SaveSession(path=str(path)))

    def open_session(self, path: str, step: int = -1) -> int:
        """Open the session saved in ``path`` at ``step`` (-1: where it was saved); it brings its settings."""
        self._model_asked = True
        return self._request(p.OpenSession(path=str(path), step=int(step), use_cache=self.use_cache, settings=self._sent_settings()))

    def inspect(self, step: int = -1, position: int = -1, layer: int = 0) -> int:
        """Ask for everything on the path at ``position`` of ``step`` (``insideReady`` answers)."""
        return self._request(p.Inspect(step=step, position=position, layer=layer))

    def attribute(self, step: int = -1, position: int = -1, target: int = -1, versus: int = -1) -> int:
        """Ask for the parts of ``target``'s logit (minus ``versus``'s) at ``position`` of ``step``
        (-1: the chosen token, no second token, the newest position, the latest step; ``attributionReady`` answers)."""
        return self._request(p.Attribute(step=step, position=position, target=target, versus=versus))

    def attention_map(self, step: int, layer: int, head: int) -> int:
        """Ask for one head's whole attention pattern at history step ``step`` (``mapReady`` answers)."""
        return self._request(p.AttentionMap(step=int(step), layer=int(layer), head=int(head)))

    def tokenize(self, text: str) -> int:
        """Ask for the tokens ``text`` would have as a prompt (``tokenizedReady`` answers; nothing changes)."""
        return self._request(p.Tokenize(text=str(text)))

    def patch(self, text: str, step: int = -1, target: int = -1, versus: int = -1, site: str = "resid_pre") -> int:
        """Ask for the activation patching map of the prompt on screen and the second prompt ``text`` at
        history step ``step`` for ``target``'s logit minus ``versus``'s (-1: the chosen token, none, the
        latest step), patching each block's ``site`` (``engine.patching.SITES``; ``patchProgress``
        tells each layer, ``patchReady`` answers)."""
        return self._request(p.Patch(text=str(text), step=int(step), target=int(target), versus=int(versus), site=str(site)))

    def compare(self, text: str, step: int = -1, target: int = -1, versus: int = -1) -> int:
        """Ask for the prompt on screen and the second prompt ``text`` stepped together at history step
        ``step``: both runs' candidates and their split of ``target``'s logit minus ``versus``'s
        (-1: the chosen token, none, the latest step; ``compareReady`` answers; nothing changes)."""
        return self._request(p.Compare(text=str(text), step=int(step), target=int(target), versus=int(versus)))

    def cancel_patch(self) -> int:
        """Stop the Patch that runs (the person pressed Cancel) before its next layer: it fails with
        ``PatchCancelled``. Returns its generation (0: no Patch runs; one still waiting is dropped)."""
        running = self.policy.in_flight
        self.policy.waiting = [r for r in self.policy.waiting if not isinstance(r, p.Patch)]
        if not isinstance(running, p.Patch) or self.engine is None:
            return 0
        self.engine.set_control("cancel_patch", running.generation)
        return running.generation

    def cancel_load(self) -> int:
        """Stop the download of the Load that runs (the person pressed Cancel): it fails with
        ``DownloadCancelled`` and the session it would have replaced stays. Returns that Load's
        generation (0: no Load runs)."""
        running = self.policy.in_flight
        if not isinstance(running, p.Load) or self.engine is None:
            return 0
        self.engine.set_control("cancel_load", running.generation)
        return running.generation

    def cancel_step(self) -> int:
        """Stop the long prefill of the Step (or Play) that runs (the person pressed Cancel): it ends
        after the block that runs with ``StepCancelled``, no step taken. Returns that request's
        generation (0: no step runs)."""
        running = self.policy.in_flight
        if not isinstance(running, (p.Step, p.Play)) or self.engine is None:
            return 0
        self.engine.set_control("cancel_step", running.generation)
        return running.generation

    def refresh(self) -> int:
        """Ask for the session as it stands (nothing changes)."""
        return self._request(p.Refresh())

    def is_current(self, result) -> bool:
        """False once ``result`` is stale: a newer restart, or the engine that made it has died."""
        return self.policy.is_current(result)

    def not_drawn(self, _result) -> None:
        """A result handed on was stale by the time it would have been drawn: the window shows an older
        session than the engine holds, so ask for that one (now, or after a refusal on its way)."""
        if self.engine is not None and self.policy.not_drawn():
            self.refresh()

    def _request(self, request: p.Request) -> int:
        request = self.policy.number(request)
        if self.engine is None:
            self.failed.emit(p.NotSent(request.generation, request))
            return request.generation
        self.policy.add(request)
        self._sync_busy()
        return request.generation

    def _send(self, request: p.Request) -> None:
        self.engine.submit(request)

    def _control(self, name: str, value: int) -> None:
        if self.engine is not None:
            self.engine.set_control(name, value)

    def _sync_busy(self) -> None:
        if self.busy != self._busy_shown:
            self._busy_shown = self.busy
            self.busyChanged.emit(self.busy)

    # -------------------------------------------------------------- replies
    def _on_engine_replied(self, reply: p.Reply) -> None:
        if isinstance(reply, p.Progress) and reply.what == "prefill":
            self.prefillProgress.emit(reply.done, reply.total)
            return
        if isinstance(reply, p.Progress) and reply.what == "patch":
            if self.policy.is_current(reply):
                self.patchProgress.emit(reply.done, reply.total)
            return
        if isinstance(reply, p.Progress):
            self.downloadProgress.emit(reply.done, reply.total)
            return
        verdict = self.policy.settle(reply)
        self._sync_busy()
        match verdict, reply:
            case Verdict.NOTE, p.Finished():
                self.noticed.emit(reply.result)
            case Verdict.SHOW, p.Finished(result=result):
                self._on_result(result)
            case Verdict.SHOW | Verdict.REFRESH, p.Failed():
                log.info("%s failed: %s", reply.request.kind, reply.error)
                self.failed.emit(reply)
                if verdict is Verdict.REFRESH:  # the window may show a session the engine no longer holds
                    self.refresh()
            case Verdict.SHOW, p.Inspected(answer=p.MapResult()):
                self.mapReady.emit(reply.answer)
            case Verdict.SHOW, p.Inspected():
                self.insideReady.emit(reply.answer)
            case Verdict.SHOW, p.Attributed():
                self.attributionReady.emit(reply.answer)
            case Verdict.SHOW, p.Tokenized():
                self.tokenizedReady.emit(reply.answer)
            case Verdict.SHOW, p.Patched():
                self.patchReady.emit(reply.answer)
            case Verdict.SHOW, p.Compared():
                self.compareReady.emit(reply.answer)

    def _on_result(self, result) -> None:
        request = result.request
        if isinstance(request, p.OpenSession):  # a reopened session brings its own settings: they are the person's now
            self.settings, self.stop_sequences = result.settings, result.stop_sequences
            self.settings_chosen = True
        elif isinstance(request, p.Load) and not self.settings_chosen:  # the model's own, which the engine started it with
            self.settings = result.settings
        # the model the engine holds: a Load's, or one a load made stale opened (a refused load after it
        # refreshes); a session viewed without its model holds none
        if isinstance(request, p.Load) or (result.can_step and result.info != self._model_shown):
            self._model_shown = result.info
            self.modelLoaded.emit(result)
        self.resultReady.emit(result)

    def _on_engine_died(self, exit_code) -> None:
        """The engine process ended (killed, out of memory, a crash in native code): start a fresh
        one, unless engines keep dying right after they start. Everything it held is gone, so
        every result in flight is stale."""
        if self._closed or self.engine is None:
            return
        old = self.engine
        old.shutdown()
        old.deleteLater()
        self.engine = None
        again = self.policy.engine_died()
        self._sync_busy()
        if not again:
            log.error("the model's process stopped %d times in a row; not starting it again", self.policy.quick_deaths)
            self.engineStopped.emit(exit_code)
            return
        self._start_engine()
        self.engineRestarted.emit(exit_code)

    def restart_engine(self) -> None:
        """Start a fresh engine after ``engineStopped`` (the person asked to try again)."""
        if self.engine is None and not self._closed:
            self._start_engine(by_person=True)

    def _start_engine(self, *, by_person: bool = False) -> None:
        engine = start_engine(self.engine_kind, self)
        engine.replied.connect(self._on_engine_replied)
        engine.died.connect(self._on_engine_died)
        self.engine = engine
        self.policy.engine_started(by_person=by_person)

    # ------------------------------------------------------------- shutdown
    @property
    def saves_pending(self) -> int:
        """Saves sent whose file is not yet written (quitting waits for them)."""
        return self.policy.saves_pending

    def shutdown(self) -> None:
        """Stop the engine (see its ``shutdown``); blocks until it has, and until the session files
        being written are (``saves_pending``). Safe to call twice."""
        self._closed = True
        self.policy.close()
        if self.engine is not None:
            self.engine.shutdown(SAVE_GRACE_S) if self.saves_pending else self.engine.shutdown()


def _shutdown_at_exit(ref: "weakref.ref[SessionController]") -> None:
    controller = ref()
    if controller is None:
        return
    try:
        controller.shutdown()
    except RuntimeError:  # its Qt objects are already deleted: their thread was stopped with them
        pass

"""The session host: runs the window's requests on the engine session, one at a time. No Qt.

It runs wherever the model runs: in the engine process (``app.engine_process``, the default: the
window's process never shares its interpreter lock with a forward pass) or on a worker thread of
the window's own process (``app.engine_thread``, for debugging). Either way exactly one thread
ever touches the session, its KV cache and the model, which are not thread-safe. Every finished
request leaves as one ``SessionResult`` (``emit("finished", result)``); every exception leaves as
``emit("failed", generation, kind, message)`` (the host never dies of one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Callable

import numpy as np

from engine import GenerationStopped, NextTokenError, PromptError, SamplingSettings, Session, load_model
from engine.trace import StepRecord

from .history import shared_prefix
from .result import SessionResult

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "The cat sat on the"
DEFAULT_SETTINGS = SamplingSettings(top_k=50, seed=0)


@dataclass(frozen=True)
class Request:
    """One thing for the worker to do. kind: load | prompt | step | back | choose | resample | reset | refresh.

    payload: load -> {"source": str | None, "loaded": LoadedModel | None, "fallback": bool,
    "prompt": str}; prompt -> str, or (str, truncate: bool); choose -> token id; resample -> SamplingSettings.
    """

    kind: str
    generation: int
    payload: Any = None


class Cancelled(Exception):
    """Raised from a download's progress callback once the window is closing: ends the download."""


class PromptTooLong(PromptError):
    """A prompt longer than the context window (the window offers to keep its last tokens)."""


class PointCache:
    """The residual stream of every computed position projected to 2-D, kept in step with a history.

    Records whose ``resid`` array is the one already projected are not projected again, so a step
    costs one [L + 1, n, d] @ [d, 2] product.
    """

    def __init__(self):
        self._resids: list[np.ndarray] = []
        self._points: list[np.ndarray] = []  # per record: float32 [L + 1, n, 2]

    def sync(self, records: tuple[StepRecord, ...], projection) -> np.ndarray:
        keep = shared_prefix(records, self._resids, "resid")
        del self._resids[keep:], self._points[keep:]
        for rec in records[keep:]:
            self._resids.append(rec.resid)
            self._points.append(projection.project(rec.resid, dims=2))  # [L + 1, n, 2]
        if not self._points:
            return np.zeros((0, 0, 2), np.float32)
        return np.concatenate(self._points, axis=1)  # [L + 1, T, 2]


def make_result(
    session: Session,
    kind: str = "step",
    generation: int = 0,
    message: str = "",
    *,
    points: PointCache | None = None,
    stopped: bool = False,
) -> SessionResult:
    """The SessionResult for ``session`` as it stands (also how a benchmark builds window input)."""
    records = session.records
    trace = session.trace() if records else None
    projection = session.projection
    cache = points if points is not None else PointCache()
    pts = cache.sync(records, projection)
    if not records:
        pts = np.zeros((session.info.n_layer + 1, 0, 2), np.float32)
    tokenizer = session.loaded.tokenizer
    prompt_ids = np.array(session.prompt_ids, dtype=np.int64)
    return SessionResult(
        generation=generation,
        kind=kind,
        info=session.info,
        prompt_ids=prompt_ids,
        prompt_pieces=tuple(tokenizer.piece(i) for i in prompt_ids),
        trace=trace,
        records=records,
        points=pts,
        explained=projection.explained[:2].copy(),
        settings=session.settings,
        message=message,
        stopped=stopped or (trace is not None and trace.stop_reason is not None),
    )


class SessionHost:
    """Owns the Session and runs each request on the one thread that calls ``handle``.

    ``emit(name, *args)`` sends "finished" (SessionResult), "failed" (generation, request kind or
    "prompt_too_long" or "skipped", message) or "progress" (bytes done, bytes total) to the window;
    ``again(request)`` queues a play loop's next step behind whatever arrived meanwhile.
    Written from another thread while a request runs (plain values, read atomically):
    ``latest_barrier``: a step request older than it was made stale by a newer reset, prompt or
    load, and is skipped unrun; ``play_generation``: the play loop still wanted (0: none);
    ``cancelled`` (the window is closing): the next download progress report raises ``Cancelled``,
    so quitting never waits for a whole download.
    """

    def __init__(self, emit: Callable[..., None], again: Callable[[Request], None]):
        self.emit, self.again = emit, again
        self.session: Session | None = None
        self.latest_barrier = 0
        self.play_generation = 0
        self.cancelled = False
        self._points = PointCache()
        self._settings = DEFAULT_SETTINGS

    def handle(self, request: Request) -> None:
        if request.kind == "play" and request.generation != self.play_generation:
            self.emit("failed", request.generation, "skipped", "")  # paused, or ended by a newer request
            return
        if request.kind == "step" and request.generation < self.latest_barrier:
            log.debug("skipping stale step request %d", request.generation)
            self.emit("failed", request.generation, "skipped", "")
            return
        try:
            result = getattr(self, f"_do_{request.kind}")(request)
        except GenerationStopped as exc:
            result = self._result(request, str(exc), stopped=True)
        except Cancelled:
            log.info("%s cancelled: the window is closing", request.kind)
            return
        except NextTokenError as exc:
            kind = "prompt_too_long" if isinstance(exc, PromptTooLong) else request.kind
            self.emit("failed", request.generation, kind, str(exc))
            return
        except Exception as exc:  # a bug, not a user error: keep the window alive and say so
            log.exception("worker request %s failed", request.kind)
            self.emit("failed", request.generation, request.kind, f"Unexpected error: {type(exc).__name__}: {exc}")
            return
        self.emit("finished", result)

    # -------------------------------------------------------------- requests
    def _result(self, request: Request, message: str, **kw) -> SessionResult:
        return make_result(self.session, request.kind, request.generation, message, points=self._points, **kw)

    def _need_session(self) -> Session:
        if self.session is None:
            raise NextTokenError("No model is loaded yet.")
        return self.session

    def _do_load(self, request: Request) -> SessionResult:
        payload = dict(request.payload or {})
        source = payload.get("source")
        t0 = perf_counter()
        note = ""
        try:
            loaded = payload.get("loaded") or load_model(source, progress=self._report_progress)
        except NextTokenError as exc:
            if self.cancelled:  # the download was stopped because the window is closing
                raise Cancelled() from exc
            if not payload.get("fallback") or source is None:
                raise
            note = f"Could not open {source}: {exc} Opened the tiny demo model instead. "
            loaded = load_model(None)
        session = Session(loaded, self.session.settings if self.session else self._settings)
        prompt = payload.get("prompt") or (self._prompt_text() or DEFAULT_PROMPT)
        kept, whole = len(session.set_prompt(prompt, truncate=True)), len(loaded.tokenizer.encode(prompt))
        self.session, self._points = session, PointCache()  # only now: a failed load keeps the old one
        seconds = perf_counter() - t0
        if kept < whole:  # never cut silently
            note += f"The prompt was cut to its last {kept:,} of its {whole:,} tokens: {loaded.info.name} reads at most {kept:,}. "
        return self._result(request, f"{note}Loaded {loaded.info.label} in {seconds:.1f} s.")

    def _report_progress(self, done: int, total: int) -> None:
        if self.cancelled:
            raise Cancelled("the window is closing")
        self.emit("progress", int(done), int(total))

    def _prompt_text(self) -> str:
        if self.session is None or not self.session.prompt_ids:
            return ""
        return self.session.loaded.tokenizer.decode(self.session.prompt_ids)

    def _do_prompt(self, request: Request) -> SessionResult:
        session = self._need_session()
        text, truncate = request.payload if isinstance(request.payload, tuple) else (request.payload, False)
        text = str(text)
        try:
            ids = session.set_prompt(text, truncate=truncate)
        except PromptError as exc:
            if len(session.loaded.tokenizer.encode(text)) > session.info.n_positions:
                raise PromptTooLong(str(exc)) from exc
            raise
        what = f"{len(ids)} tokens"
        if truncate and len(ids) == session.info.n_positions:
            whole = len(session.loaded.tokenizer.encode(text))
            what = f"cut to its last {len(ids):,} of {whole:,} tokens (the most the model reads)" if whole > len(ids) else what
        return self._result(request, f"Prompt: {what}. Press Step (Space) to run the prefill.")

    def _do_step(self, request: Request) -> SessionResult:
        session = self._need_session()
        trace = session.step()
        rec = trace.record
        what = f"chose “{trace.chosen_piece}” (p = {trace.chosen_prob:.1%}, rank {trace.chosen_rank:,})"
        if rec.step == 0:
            message = f"Prefill: {rec.n_new} prompt tokens in one pass ({rec.forward_ms:.0f} ms); {what}."
        else:
            message = f"Step {rec.step}: one new position in {rec.forward_ms:.0f} ms; {what}."
        if trace.stop_reason:
            message += " " + trace.stop_message
        return self._result(request, message)

    def _do_play(self, request: Request) -> SessionResult:
        """One step of a play loop, then the next is queued here: the loop never waits for the window
        to draw, and a pause or any newer request (queued meanwhile) ends it before its next step."""
        step = Request("step", request.generation)
        try:
            result = self._do_step(step)
        except GenerationStopped as exc:
            return self._result(step, str(exc), stopped=True)
        if not result.stopped:
            self.again(request)
        return result

    def _do_back(self, request: Request) -> SessionResult:
        session = self._need_session()
        if session.n_steps == 0:
            return self._result(request, "Already at the start: nothing to go back to.")
        session.rewind(session.n_steps - 2)
        if session.n_steps == 0:
            return self._result(request, "Back before the prefill: no step has run.")
        return self._result(request, f"Back to step {session.n_steps - 1}.")

    def _do_choose(self, request: Request) -> SessionResult:
        session = self._need_session()
        trace = session.choose(int(request.payload))
        return self._result(request, f"Branched: step {trace.step} now takes “{trace.chosen_piece}” (chosen by you).")

    def _do_resample(self, request: Request) -> SessionResult:
        settings: SamplingSettings = request.payload
        self._settings = settings
        if self.session is None:
            raise NextTokenError("No model is loaded yet.")
        if self.session.n_steps == 0:
            self.session.settings = settings
            return self._result(request, f"Sampling: {settings.describe()}.")
        trace = self.session.resample(settings)
        return self._result(
            request, f"Re-sampled step {trace.step} ({settings.describe()}): chose “{trace.chosen_piece}”, no forward pass."
        )

    def _do_refresh(self, request: Request) -> SessionResult:
        """The session as it stands, unchanged (after a failed load dropped a result as stale)."""
        return self._result(request, "")

    def _do_reset(self, request: Request) -> SessionResult:
        self._need_session().reset()
        return self._result(request, "Reset: the prompt is kept, every step dropped.")



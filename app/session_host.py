"""The session host: runs the window's requests on the engine session, one at a time. No Qt.

It runs wherever the model runs: in the engine process (``app.engine_process``, the default: the
window's process never shares its interpreter lock with a forward pass) or on a worker thread of
the window's own process (``app.engine_thread``, for debugging). Either way exactly one thread
ever touches the session, its KV cache and the model, which are not thread-safe. Requests are the
types in ``app.protocol``. Every finished request leaves as one ``SessionResult``
(``emit("finished", result)``), every refused or failed one as ``emit("failed", generation,
kind, message)`` and every request skipped unrun as ``emit("skipped", generation)``: the host
never dies of an exception.
"""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Callable

import numpy as np

from engine.errors import GenerationStopped, NextTokenError, PromptError
from engine.loading import load_model
from engine.defaults import DEFAULT_PROMPT
from engine.session import Session
from engine.trace import StepRecord

from . import protocol as p
from .history import shared_prefix
from .result import InsideResult, SessionResult

log = logging.getLogger(__name__)


class Cancelled(Exception):
    """Raised from a download's progress callback once the window is closing or the person cancelled
    that load (``cancel_load``): ends the download."""


class LoadCancelled(NextTokenError):
    """The person cancelled a download: the load fails with this message, the session stays."""


class PromptTooLong(PromptError):
    """A prompt longer than the context window (the window offers to keep its last tokens)."""


class PointCache:
    """The residual stream of every computed position projected to 2-D, kept in step with a history,
    and the two parts of its first vector (token and position embeddings) on the same basis.

    Records whose ``resid`` array is the one already projected are not projected again, so a step
    costs one [L + 1, n, d] @ [d, 2] product and one [2, n, d] @ [d, 2].
    """

    def __init__(self):
        self._resids: list[np.ndarray] = []
        self._points: list[np.ndarray] = []  # per record: float32 [L + 1, n, 2]
        self._embeds: list[np.ndarray] = []  # per record: float32 [2, n, 2], token then position embeddings

    def embed_parts(self) -> tuple[np.ndarray, ...]:
        """Per record of the last ``sync``, float32 [2, n, 2]: each array is made once, so a result
        that carries them sends only the newest step's on the pipe (``app.wire``)."""
        return tuple(self._embeds)

    def sync(self, records: tuple[StepRecord, ...], projection) -> np.ndarray:
        keep = shared_prefix(records, self._resids, "resid")
        del self._resids[keep:], self._points[keep:], self._embeds[keep:]
        for rec in records[keep:]:
            self._resids.append(rec.resid)
            self._points.append(projection.project(rec.resid, dims=2))  # [L + 1, n, 2]
            self._embeds.append(projection.project(np.stack([rec.token_embed, rec.pos_embed]), dims=2))  # [2, n, 2]
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
        prompt_text=tokenizer.decode(prompt_ids) if len(prompt_ids) else "",
        trace=trace,
        records=records,
        points=pts,
        embed_parts=cache.embed_parts() if records else (),
        explained=projection.explained[:2].copy(),
        settings=session.settings,
        message=message,
        stopped=stopped or (trace is not None and trace.stop_reason is not None),
        branches=session.branches(),
        can_step=session.loaded.model is not None,
        why_not=session.loaded.missing_reason,
    )


class SessionHost:
    """Owns the Session and runs each request (``app.protocol``) on the one thread that calls ``handle``.

    ``emit(name, *args)`` sends "finished" (SessionResult), "inspected" (generation, InsideResult),
    "failed" (generation, request kind or "prompt_too_long", message), "skipped" (generation) or
    "progress" (bytes done, bytes total) to the window; ``again(request)`` queues a play loop's next step behind whatever arrived
    meanwhile. The control values (``protocol.CONTROLS``) are written from another thread while a
    request runs (plain values, read atomically); ``cancelled`` (the window is closing) makes the
    next download progress report raise ``Cancelled``, so quitting never waits for a download, and
    so does ``cancel_load`` naming the Load that runs (the person pressed Cancel): that load then
    fails with "Download cancelled: still using <model>." (with no model yet, the demo model opens).
    """

    def __init__(self, emit: Callable[..., None], again: Callable[[p.Request], None]):
        self.emit, self.again = emit, again
        self.session: Session | None = None
        self.loaded = None  # the model loaded last: a session opened from a file to view only does not hold it
        self.latest_barrier = 0
        self.play_generation = 0
        self.cancel_load = 0
        self.cancelled = False
        self._loading = -1  # the generation of the Load whose download runs
        self._points = PointCache()
        self._run = {
            p.Load: self._load,
            p.SetPrompt: self._set_prompt,
            p.Step: self._step,
            p.Play: self._play,
            p.Back: self._back,
            p.Choose: self._choose,
            p.Resample: self._resample,
            p.Reset: self._reset,
            p.SetCache: self._set_cache,
            p.Inspect: self._inspect,
            p.Switch: self._switch,
            p.SaveSession: self._save,
            p.OpenSession: self._open,
            p.Refresh: self._refresh,
        }

    def set_control(self, name: str, value: int) -> None:
        """Set one of ``protocol.CONTROLS``; any other name is refused."""
        if name not in p.CONTROLS:
            raise ValueError(f"{name!r} is not a control value (those are {', '.join(p.CONTROLS)})")
        setattr(self, name, int(value))

    def handle(self, request: p.Request) -> None:
        stale_play = isinstance(request, p.Play) and request.generation != self.play_generation
        stale_step = isinstance(request, p.Step) and request.generation < self.latest_barrier
        if stale_play or stale_step:  # paused or ended by a newer request; made stale by a restart
            self.emit("skipped", request.generation)
            return
        try:
            result = self._run[type(request)](request)
            if isinstance(request, p.Inspect):
                self.emit("inspected", request.generation, result)
                return
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
            log.exception("request %s failed", request.kind)
            self.emit("failed", request.generation, request.kind, f"Unexpected error: {type(exc).__name__}: {exc}")
            return
        self.emit("finished", result)

    # -------------------------------------------------------------- requests
    def _result(self, request: p.Request, message: str, **kw) -> SessionResult:
        return make_result(self.session, request.kind, request.generation, message, points=self._points, **kw)

    def _need_session(self) -> Session:
        if self.session is None:
            raise NextTokenError("No model is loaded yet.")
        return self.session

    def _load(self, request: p.Load) -> SessionResult:
        source = request.source
        t0 = perf_counter()
        note = ""
        if self.session is not None:  # a failed load keeps this session: with the settings the person chose
            self.session.settings, self.session.use_cache = request.settings, request.use_cache
        self._loading = request.generation
        try:
            loaded = request.loaded or load_model(source, progress=self._report_progress)
        except Cancelled:
            if self.cancelled:  # the window is closing: nobody to tell
                raise
            if self.session is not None:
                raise LoadCancelled(f"Download cancelled: still using {self.session.info.name}.") from None
            note = f"Download of {source} cancelled: opened the tiny demo model instead. "
            loaded = load_model(None)
        except NextTokenError as exc:
            if self.cancelled:  # the download was stopped because the window is closing
                raise Cancelled() from exc
            if not request.fallback or source is None:
                raise
            note = f"Could not open {source}: {exc} Opened the tiny demo model instead. "
            loaded = load_model(None)
        session = Session(loaded, request.settings, use_cache=request.use_cache)
        prompt = request.prompt or self._prompt_text() or DEFAULT_PROMPT
        kept, whole = len(session.set_prompt(prompt, truncate=True)), len(loaded.tokenizer.encode(prompt))
        self.session, self.loaded, self._points = session, loaded, PointCache()  # only now: a failed load keeps the old one
        seconds = perf_counter() - t0
        if kept < whole:  # never cut silently
            note += (
                f"The prompt was cut to its last {kept:,} of its {whole:,} tokens: {loaded.info.name} reads at most "
                f"{loaded.info.n_positions:,}, and {loaded.info.n_positions - kept:,} stay free to generate. "
            )
        return self._result(request, f"{note}Loaded {loaded.info.label} in {seconds:.1f} s.")

    def _report_progress(self, done: int, total: int) -> None:
        if self.cancelled:
            raise Cancelled("the window is closing")
        if self.cancel_load == self._loading:
            raise Cancelled("the person cancelled the download")
        self.emit("progress", int(done), int(total))

    def _prompt_text(self) -> str:
        if self.session is None or not self.session.prompt_ids:
            return ""
        return self.session.loaded.tokenizer.decode(self.session.prompt_ids)

    def _live_session(self) -> Session:
        """The session, or a fresh one on the model loaded last when the session on screen was opened
        from a file to view only (a new prompt or a Reset starts over with a model that can step)."""
        session = self._need_session()
        if session.loaded.model is None and self.loaded is not None:
            text = session.loaded.tokenizer.decode(session.prompt_ids) or DEFAULT_PROMPT  # the file's prompt
            session = Session(self.loaded, session.settings, use_cache=session.use_cache)
            session.set_prompt(text, truncate=True)
            self.session, self._points = session, PointCache()
        return session

    def _set_prompt(self, request: p.SetPrompt) -> SessionResult:
        session = self._live_session()
        session.settings = request.settings  # first: a refused prompt must not lose them (a Resample
        # waiting behind this request was dropped when it was sent)
        text, truncate = str(request.text), request.truncate
        try:
            ids = session.set_prompt(text, truncate=truncate)
        except PromptError as exc:
            if len(session.loaded.tokenizer.encode(text)) > session.info.n_positions:
                raise PromptTooLong(str(exc)) from exc
            raise
        what = f"{len(ids)} tokens"
        if truncate:
            whole = len(session.loaded.tokenizer.encode(text))
            free = session.info.n_positions - len(ids)
            what = f"cut to its last {len(ids):,} of {whole:,} tokens ({free:,} stay free to generate)" if whole > len(ids) else what
        return self._result(request, f"Prompt: {what}. Press Step (Space) to run the prefill.")

    def _step(self, request: p.Request) -> SessionResult:
        session = self._need_session()
        trace = session.step()
        rec = trace.record
        # counted as the chips count the generated tokens (the prefill chooses token 1), the step as the views do
        what = (f"“{trace.chosen_piece}”, sampling p {trace.sampling_prob:.1%}, model p {trace.model_prob:.1%}, "
                f"rank {trace.chosen_rank:,}")
        if rec.step == 0:
            message = f"Token 1 (prefill, {rec.n_new} positions, {rec.forward_ms:.0f} ms): {what}."
        else:
            message = f"Token {rec.step + 1} (step {rec.step}, {rec.forward_ms:.0f} ms): {what}."
        if session.last_catch_up:
            n, ms = session.last_catch_up
            message += (f" Before it, the KV cache caught up on {n:,} position{'s' if n != 1 else ''} it did not hold for "
                        f"this branch ({ms:.0f} ms, not in the step's time).")
        if trace.stop_reason:
            message += " " + trace.stop_message
        return self._result(request, message)

    def _play(self, request: p.Play) -> SessionResult:
        """One step of a play loop, then the next is queued here: the loop never waits for the window
        to draw, and a pause or any newer request (queued meanwhile) ends it before its next step.
        Its result is a "step" result."""
        step = p.Step(request.generation)
        try:
            result = self._step(step)
        except GenerationStopped as exc:
            return self._result(step, str(exc), stopped=True)
        if not result.stopped:
            self.again(request)
        return result

    def _back(self, request: p.Back) -> SessionResult:
        session = self._need_session()
        if session.n_steps == 0:
            return self._result(request, "Already at the start: nothing to go back to.")
        session.rewind(session.n_steps - 2)
        if session.n_steps == 0:
            return self._result(request, "Back before the prefill: no step shown (the steps stay as a branch: the Branches view, Alt+5).")
        return self._result(request, f"Back to step {session.n_steps - 1} (the later steps stay as a branch: the Branches view, Alt+5).")

    def _choose(self, request: p.Choose) -> SessionResult:
        trace = self._need_session().choose(int(request.token_id))
        return self._result(
            request, f"Branched: step {trace.step} now takes “{trace.chosen_piece}” (chosen by you); the earlier choice stays as a branch."
        )

    def _resample(self, request: p.Resample) -> SessionResult:
        session, settings = self._need_session(), request.settings
        if session.n_steps == 0:
            session.settings = settings
            return self._result(request, f"Sampling: {settings.describe()}.")
        trace = session.resample(settings)
        return self._result(
            request, f"Re-sampled step {trace.step} ({settings.describe()}): chose “{trace.chosen_piece}”, no forward pass."
        )

    def _set_cache(self, request: p.SetCache) -> SessionResult:
        session = self._need_session()
        session.use_cache = request.on
        if request.on:
            return self._result(request, "The KV cache is on: each step runs one new position against the cached keys and values.")
        return self._result(
            request, "Generating without the KV cache: each step runs the whole sequence again, as a model without a cache must."
        )

    def _inspect(self, request: p.Inspect):
        from engine.inside import inside  # the logit lens and the path: only when a view asks

        session = self._need_session()
        if session.n_steps == 0:
            raise NextTokenError("Step once first: the path inside the model is shown for a step that has run.")
        if session.loaded.model is None:
            raise NextTokenError(session.loaded.missing_reason)
        step = None if request.step < 0 else request.step
        position = None if request.position < 0 else request.position
        trace = inside(session, step, position, kv_layers=(int(request.layer),))
        ids = {trace.token_id, trace.next_id, *(int(i) for i in trace.lens_ids.ravel())}
        tokenizer = session.loaded.tokenizer
        return InsideResult(trace, {i: tokenizer.piece(i) for i in ids})

    def _switch(self, request: p.Switch) -> SessionResult:
        session = self._need_session()
        trace = session.switch(int(request.node))
        if trace is None:
            return self._result(request, "Before the prefill: every branch is kept (the Branches view, Alt+5).")
        return self._result(
            request, f"Showing a branch at step {trace.step} (“{trace.chosen_piece}”), as it was: nothing was recomputed."
        )

    def _save(self, request: p.SaveSession) -> SessionResult:
        from engine.session_file import save_session

        session = self._need_session()
        path = save_session(session, request.path)
        branches = len(session.branches().leaves())
        size = path.stat().st_size
        return self._result(
            request, f"Saved {len(session.tree):,} steps on {branches} branch{'es' if branches != 1 else ''} to {path} ({size / 2**20:.1f} MiB)."
        )

    def _open(self, request: p.OpenSession) -> SessionResult:
        from engine.session_file import open_session, read_session

        if self.session is not None:  # a refused file leaves the session as it was, with the person's settings
            self.session.settings = request.settings
        saved = read_session(request.path)
        session, note = open_session(saved, self.loaded)
        session.use_cache = request.use_cache
        session.max_new_tokens = None  # a file from ``--export --steps N``: the window has no such limit
        if request.step >= 0:
            if request.step >= session.n_steps:
                raise NextTokenError(
                    f"The session in {request.path} has steps 0 to {session.n_steps - 1} on its branch: there is no step {request.step}."
                )
            session.rewind(request.step)
        self.session, self._points = session, PointCache()
        branches = len(session.branches().leaves())
        shown = f"step {session.n_steps - 1}" if session.n_steps else "before the prefill"
        return self._result(
            request,
            f"Opened {request.path}: {len(session.tree):,} steps on {branches} branch{'es' if branches != 1 else ''}, showing {shown}. {note}".strip(),
        )

    def _refresh(self, request: p.Refresh) -> SessionResult:
        return self._result(request, "")

    def _reset(self, request: p.Reset) -> SessionResult:
        session = self._live_session()
        session.settings = request.settings
        session.reset()
        return self._result(request, "Reset: the prompt is kept, every step and branch dropped.")

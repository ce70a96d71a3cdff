"""The session host: runs the window's requests on the engine session, one at a time. No Qt.

It runs wherever the model runs: in the engine process (``app.window.engine_process``, the default: the
window's process never shares its interpreter lock with a forward pass) or on a worker thread of
the window's own process (``app.window.engine_thread``, for debugging). Either way exactly one thread
ever touches the session, its KV cache and the model, which are not thread-safe. Requests and
replies are the types in ``app.protocol.messages``: every request is answered by one reply (``Finished``
with a ``p.SessionResult``, ``Inspected``, ``Skipped`` or a ``Failed`` kind), so the host never dies
of an exception. The host sends facts (``app.protocol.messages.Facts``); the window writes the words. A Save
is answered at once (the session's snapshot is queued on ``app.host.saver``'s thread, so the next
request runs while the file is written), and its file again by a ``SaveWritten`` request the
saver queues here when the file is written.
"""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Callable

import numpy as np

from engine.chat import ChatTurn, ChatTurnTooLong, chat_prompt_ids
from engine.errors import ExportError, GenerationStopped, NextTokenError, PromptTooLong
from engine.loading import load_model
from engine.runtime import CPU
from engine.defaults import DEFAULT_PROMPT, model_settings
from engine.session import Session
from engine.trace import StepRecord, shared_prefix

from app.protocol import messages as p

from app.host.saver import Saver, SaveJob

log = logging.getLogger(__name__)

_REPLY = {p.Inspect: p.Inspected, p.AttentionMap: p.Inspected, p.Attribute: p.Attributed, p.Tokenize: p.Tokenized,
          p.Patch: p.Patched, p.Compare: p.Compared}  # the reply of each request not answered by a session


class Cancelled(Exception):
    """Raised from a download's progress callback once the window is closing or the person cancelled
    that load (``cancel_load``): ends the download."""


class PrefillCancelled(Exception):
    """Raised from a long prefill's progress callback once the person cancelled that step
    (``cancel_step``): the pass ends after the block that ran, the session stays as it was."""

    def __init__(self, done: int, total: int):
        super().__init__(f"cancelled after block {done} of {total}")
        self.done, self.total = done, total


class PatchStopped(Exception):
    """A Patch the person cancelled (``cancel_patch``) stopped before layer ``done`` of ``total``."""

    def __init__(self, done: int, total: int):
        super().__init__(f"cancelled after layer {done} of {total}")
        self.done, self.total = done, total


TOP_CANDIDATES = 8  # each prompt's most likely next tokens a Patch or Compare answer names


def top_candidates(logits: np.ndarray, piece, n: int = TOP_CANDIDATES) -> tuple[tuple[int, str, float], ...]:
    """(id, piece, model probability) of the ``n`` largest of ``logits`` [V] (ties: the lower id)."""
    logits = np.asarray(logits, np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    order = np.lexsort((np.arange(len(logits)), -logits))[:n]  # by logit, then by id
    return tuple((int(i), piece(int(i)), float(probs[i])) for i in order)


class LoadCancelled(NextTokenError):
    """The person cancelled a download: the load fails, the session stays (``protocol.DownloadCancelled``)."""


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
        that carries them sends only the newest step's on the pipe (``app.protocol.wire``)."""
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
    request: p.Request = p.Step(),
    facts: p.Facts = p.Facts(),
    *,
    points: PointCache | None = None,
    stopped: bool = False,
) -> p.SessionResult:
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
    return p.SessionResult(
        generation=request.generation,
        request=request,
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
        facts=facts,
        stopped=stopped or (trace is not None and trace.stop_reason is not None),
        branches=session.branches(),
        can_step=session.loaded.model is not None,
        why_not=session.loaded.missing_reason,
        chat=session.chat,
        stop_sequences=session.stop_sequences,
    )


def keep_settings(session: Session, request) -> None:
    """Use the settings ``request`` carries from now on; None (the person has chosen none yet) keeps
    the session's, which are the model's own (``engine.defaults.model_settings``)."""
    if request.settings is not None:
        session.settings = request.settings


def _begin(session: Session, chat: ChatTurn | None, text: str) -> dict[str, int]:
    """Start ``session`` on ``text``: the user's message of ``chat`` through the model's chat template
    when the model has one (the start of the message cut so that the turn fits), else the plain text
    cut to fit. Returns the p.Facts of it: the tokens kept and the whole turn's or text's,
    ``chat_needs`` when the template and the system message alone left no room (the prompt is then
    the plain text), and the characters the tokenizer left out."""
    needs, tokenizer = 0, session.loaded.tokenizer
    if chat is not None and session.loaded.info.chat_template:
        turn = ChatTurn(chat.system, text)
        try:
            n = len(session.set_chat(turn, truncate=True))
        except ChatTurnTooLong as exc:
            needs = exc.needs
        else:
            whole = n if session.chat == turn else len(chat_prompt_ids(tokenizer, text, chat.system or None))
            return dict(kept=n, whole=whole, left_out=tokenizer.left_out(chat.system + text))
    kept = len(session.set_prompt(text, truncate=True))
    return dict(kept=kept, whole=len(tokenizer.encode(text)), chat_needs=needs, left_out=tokenizer.left_out(text))


class SessionHost:
    """Owns the Session and runs each request (``app.protocol.messages``) on the one thread that calls ``handle``.

    ``emit(reply)`` sends each ``protocol.Reply`` to the window (a download's ``Progress`` too);
    ``again(request)`` queues a play loop's next step behind whatever arrived meanwhile. The control values (``protocol.CONTROLS``) are written from another thread while a
    request runs (plain values, read atomically); ``cancelled`` (the window is closing) makes the
    next download progress report raise ``Cancelled``, so quitting never waits for a download, and
    so does ``cancel_load`` naming the Load that runs (the person pressed Cancel): that load then
    fails with ``DownloadCancelled`` (with no model yet, the demo model opens).
    """

    def __init__(self, emit: Callable[[p.Reply], None], again: Callable[[p.Request], None]):
        self.emit, self.again = emit, again
        self.session: Session | None = None
        self.loaded = None  # the model loaded last: a session opened from a file to view only does not hold it
        self.latest_barrier = 0
        self.play_generation = 0
        self.cancel_load = 0
        self.cancel_step = 0
        self.cancel_patch = 0
        self.cancelled = False
        self._loading = -1  # the generation of the Load whose download runs
        self._points = PointCache()
        self.saver = Saver(self._on_saver_written)  # writes session files on its own thread
        self._run = {
            p.Load: self._load,
            p.SetPrompt: self._set_prompt,
            p.SetChat: self._set_chat,
            p.SetStops: self._set_stops,
            p.Step: self._step,
            p.Play: self._play,
            p.Back: self._back,
            p.Choose: self._choose,
            p.Resample: self._resample,
            p.Reset: self._reset,
            p.SetCache: self._set_cache,
            p.Inspect: self._inspect,
            p.Attribute: self._attribute,
            p.Tokenize: self._tokenize,
            p.Patch: self._patch,
            p.Compare: self._compare,
            p.AttentionMap: self._attention_map,
            p.Switch: self._switch,
            p.SaveSession: self._save,
            p.OpenSession: self._open,
            p.Refresh: self._refresh,
            p.SaveWritten: self._saved,
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
            self.emit(p.Skipped(request.generation))
            return
        g = request.generation
        try:
            answer = self._run[type(request)](request)
            reply = _REPLY.get(type(request), p.Finished)(g, answer)
        except GenerationStopped as exc:
            reply = p.Finished(g, self._result(request, p.Facts(stop=str(exc)), stopped=True))
        except Cancelled:
            log.info("%s cancelled: the window is closing", request.kind)
            return
        except PromptTooLong as exc:
            reply = p.PromptTooLong(g, request, str(exc), keep=exc.keep)
        except LoadCancelled as exc:
            reply = p.DownloadCancelled(g, request, str(exc), kept=self.session.info.name)
        except PrefillCancelled as exc:
            reply = p.StepCancelled(g, request, str(exc), done=exc.done, total=exc.total)
        except PatchStopped as exc:
            if self.cancelled:  # the window is closing: nobody to tell
                log.info("patch cancelled: the window is closing")
                return
            reply = p.PatchCancelled(g, request, str(exc), done=exc.done, total=exc.total)
        except NextTokenError as exc:
            kept = self.session.info.name if isinstance(request, p.Load) and self.session is not None else ""
            reply = p.Failed(g, request, str(exc), kept=kept)
        except Exception as exc:  # a bug, not a user error: keep the window alive and say so
            log.exception("request %s failed", request.kind)
            reply = p.Crashed(g, request, f"{type(exc).__name__}: {exc}")
        self.emit(reply)

    # -------------------------------------------------------------- requests
    def _result(self, request: p.Request, facts: p.Facts = p.Facts(), **kw) -> p.SessionResult:
        return make_result(self.session, request, facts, points=self._points, **kw)

    def _need_session(self) -> Session:
        if self.session is None:
            raise NextTokenError("No model is loaded yet.")
        return self.session

    def _load(self, request: p.Load) -> p.SessionResult:
        source = request.source
        t0 = perf_counter()
        fallback = why = ""
        if self.session is not None:  # a failed load keeps this session: with the settings the person chose
            self.session.use_cache = request.use_cache
            if request.settings is not None:
                self.session.settings = request.settings
        self._loading = request.generation
        try:
            loaded = request.loaded or load_model(source, progress=self._report_progress, runtime=request.runtime)
        except Cancelled:
            if self.cancelled:  # the window is closing: nobody to tell
                raise
            if self.session is not None:
                raise LoadCancelled(f"Download cancelled: still using {self.session.info.name}.") from None
            fallback, loaded = str(source), load_model(None, runtime=CPU)
        except NextTokenError as exc:
            if self.cancelled:  # the download was stopped because the window is closing
                raise Cancelled() from exc
            if not request.fallback or source is None:
                raise
            fallback, why, loaded = str(source), str(exc), load_model(None, runtime=CPU)
        settings = request.settings if request.settings is not None else model_settings(loaded.info.generation)
        session = Session(loaded, settings, use_cache=request.use_cache, stop_sequences=request.stop_sequences)
        begun = _begin(session, request.chat, request.prompt or self._prompt_text() or DEFAULT_PROMPT)
        self.session, self.loaded, self._points = session, loaded, PointCache()  # only now: a failed load keeps the old one
        facts = p.Facts(seconds=perf_counter() - t0, fallback=fallback, why=why, **begun)
        return self._result(request, facts)

    def _report_progress(self, done: int, total: int) -> None:
        if self.cancelled:
            raise Cancelled("the window is closing")
        if self.cancel_load == self._loading:
            raise Cancelled("the person cancelled the download")
        self.emit(p.Progress(self._loading, int(done), int(total)))

    def _prompt_text(self) -> str:
        if self.session is None or not self.session.prompt_ids:
            return ""
        if self.session.chat is not None:
            return self.session.chat.user
        return self.session.loaded.tokenizer.decode(self.session.prompt_ids)

    def _live_session(self) -> Session:
        """The session, or a fresh one on the model loaded last when the session on screen was opened
        from a file to view only (a new prompt or a Reset starts over with a model that can step)."""
        session = self._need_session()
        if session.loaded.model is None and self.loaded is not None:
            chat = session.chat  # the file's turn, or its prompt
            text = chat.user if chat is not None else self._prompt_text() or DEFAULT_PROMPT
            session = Session(self.loaded, session.settings, use_cache=session.use_cache, stop_sequences=session.stop_sequences)
            _begin(session, chat, text)
            self.session, self._points = session, PointCache()
        return session

    def _set_prompt(self, request: p.SetPrompt) -> p.SessionResult:
        session = self._live_session()
        keep_settings(session, request)  # first: a refused prompt must not lose them (a Resample
        # waiting behind this request was dropped when it was sent)
        text, truncate = str(request.text), request.truncate
        ids = session.set_prompt(text, truncate=truncate)  # PromptTooLong: too long for the context or the memory free
        whole = len(session.loaded.tokenizer.encode(text)) if truncate else len(ids)
        return self._result(request, p.Facts(kept=len(ids), whole=whole, left_out=session.loaded.tokenizer.left_out(text)))

    def _set_chat(self, request: p.SetChat) -> p.SessionResult:
        session = self._live_session()
        keep_settings(session, request)  # first, as for a prompt
        ids = session.set_chat(request.turn)
        left_out = session.loaded.tokenizer.left_out(request.turn.system + request.turn.user)
        return self._result(request, p.Facts(kept=len(ids), whole=len(ids), left_out=left_out))

    def _set_stops(self, request: p.SetStops) -> p.SessionResult:
        self._need_session().stop_sequences = request.sequences
        return self._result(request)

    def _step(self, request: p.Request) -> p.SessionResult:
        session = self._need_session()
        g = request.generation
        def progress(done: int, total: int) -> None:
            if self.cancelled:  # the window is closing: the pass ends after this block
                raise Cancelled("the window is closing")
            if self.cancel_step == g and done < total:
                raise PrefillCancelled(done, total)
            self.emit(p.Progress(g, done, total, what="prefill"))

        session.progress = progress
        try:
            session.step()
        finally:
            session.progress = None
        return self._result(request, p.Facts(catch_up=session.last_catch_up or None))

    def _play(self, request: p.Play) -> p.SessionResult:
        """One step of a play loop, then the next is queued here: the loop never waits for the window
        to draw, and a pause or any newer request (queued meanwhile) ends it before its next step.
        Its result is a "step" result."""
        step = p.Step(request.generation)
        try:
            result = self._step(step)
        except GenerationStopped as exc:
            return self._result(step, p.Facts(stop=str(exc)), stopped=True)
        if not result.stopped:
            self.again(request)
        return result

    def _back(self, request: p.Back) -> p.SessionResult:
        session = self._need_session()
        if session.n_steps == 0:
            return self._result(request, p.Facts(moved=False))
        session.rewind(session.n_steps - 2)
        return self._result(request)

    def _choose(self, request: p.Choose) -> p.SessionResult:
        self._need_session().choose(int(request.token_id))
        return self._result(request)

    def _resample(self, request: p.Resample) -> p.SessionResult:
        session, settings = self._need_session(), request.settings
        if session.n_steps == 0:
            session.settings = settings
        else:
            session.resample(settings)
        return self._result(request)

    def _set_cache(self, request: p.SetCache) -> p.SessionResult:
        session = self._need_session()
        session.use_cache = request.on
        return self._result(request)

    def _stepped_session(self, what: str) -> Session:
        """The session, when it has a step and its model (a view of what the model computed asks)."""
        session = self._need_session()
        if session.n_steps == 0:
            raise NextTokenError(f"Step once first: {what} is shown for a step that has run.")
        if session.loaded.model is None:
            raise NextTokenError(session.loaded.missing_reason)
        return session

    def _inspect(self, request: p.Inspect):
        from engine.inside import inside  # the logit lens and the path: only when a view asks

        session = self._stepped_session("the path inside the model")
        step = None if request.step < 0 else request.step
        position = None if request.position < 0 else request.position
        trace = inside(session, step, position, kv_layers=(int(request.layer),))
        ids = {trace.token_id, trace.next_id, *(int(i) for i in trace.lens_ids.ravel())}
        tokenizer = session.loaded.tokenizer
        return p.InsideResult(trace, {i: tokenizer.piece(i) for i in ids})

    def _attribute(self, request: p.Attribute) -> p.AttributionResult:
        from engine.attribution import attribute  # only when the Why view asks

        session = self._stepped_session("what each part of the model adds to a logit")
        r = request
        a = attribute(session, None if r.step < 0 else r.step, None if r.position < 0 else r.position,
                      target=None if r.target < 0 else r.target, versus=r.versus)
        piece = session.loaded.tokenizer.piece
        ids = session.token_ids()[: a.position + 1]
        return p.AttributionResult(a, piece(a.target), piece(a.versus) if a.versus >= 0 else "",
                                 tuple(piece(int(i)) for i in ids))

    def _tokenize(self, request: p.Tokenize) -> p.TokensResult:
        tokenizer = self._need_session().loaded.tokenizer
        ids = np.array(tokenizer.encode(str(request.text)), dtype=np.int64)
        return p.TokensResult(request.text, ids, tuple(tokenizer.piece(int(i)) for i in ids))

    def _pair(self, session: Session, request: p.Patch | p.Compare) -> tuple[int, np.ndarray, np.ndarray, int]:
        """(step, the first run's tokens, the second's, the target) of a pair request: the step's own
        tokens, and the second prompt's followed by the same chosen tokens."""
        from engine.inside import resolve

        if not request.text.strip():
            raise NextTokenError("The second prompt is empty: type the prompt to compare with the first.")
        step, _, first, chosen = resolve(session, None if request.step < 0 else request.step, None)
        second_prompt = np.array(session.loaded.tokenizer.encode(request.text), np.int64)
        second = np.concatenate([second_prompt, first[len(session.prompt_ids):]])  # the same chosen tokens follow
        return step, first, second, chosen if request.target < 0 else int(request.target)

    def _patch(self, request: p.Patch) -> p.PatchResult:
        from engine.patching import PatchingCancelled, patch  # only when the Why view asks

        session = self._stepped_session("patching")
        step, first, second, target = self._pair(session, request)
        n_prompt, n_second = len(session.prompt_ids), len(second) - (len(first) - len(session.prompt_ids))
        if n_second != n_prompt:
            raise NextTokenError(
                f"Patching needs two prompts with as many tokens: the first has {n_prompt:,}, the second "
                f"{n_second:,}, so a position of one is not the same place in the other.")
        g, told = request.generation, [0, session.info.n_layer]

        def progress(done: int, total: int) -> None:
            told[:] = done, total
            self.emit(p.Progress(g, done, total, what="patch"))

        try:
            result = patch(session.loaded.model, first, second, target, int(request.versus), request.site,
                           cancelled=lambda: self.cancelled or self.cancel_patch == g, progress=progress)
        except PatchingCancelled:
            raise PatchStopped(*told) from None
        piece = session.loaded.tokenizer.piece
        return p.PatchResult(
            result, result.restored, result.clean, result.corrupted, step, request.text,
            tuple(piece(int(i)) for i in first), tuple(piece(int(i)) for i in second),
            piece(target), piece(result.versus) if result.versus >= 0 else "",
            top_candidates(result.clean_last, piece), top_candidates(result.corrupted_last, piece))

    def _compare(self, request: p.Compare) -> p.CompareResult:
        from engine.attribution import attribute_tokens  # only when the Why view asks

        session = self._stepped_session("a prompt pair")
        step, first, second, target = self._pair(session, request)
        model, versus = session.loaded.model, int(request.versus)
        a_first, first_logits = attribute_tokens(model, first, target, versus, step)
        a_second, second_logits = attribute_tokens(model, second, target, versus, step)
        piece = session.loaded.tokenizer.piece
        return p.CompareResult(
            a_first, a_second, step, request.text, tuple(piece(int(i)) for i in first), tuple(piece(int(i)) for i in second),
            piece(target), piece(versus) if versus >= 0 else "",
            top_candidates(first_logits, piece), top_candidates(second_logits, piece))

    def _attention_map(self, request: p.AttentionMap) -> p.MapResult:
        from engine.attention import head_map

        session = self._need_session()
        rows = head_map(session, int(request.step), int(request.layer), int(request.head))
        return p.MapResult(session.records[request.step], int(request.layer), int(request.head), rows)

    def _switch(self, request: p.Switch) -> p.SessionResult:
        self._need_session().switch(int(request.node))
        return self._result(request)

    def _save(self, request: p.SaveSession) -> p.SessionResult:
        """Snapshot the session here (cheap) and let the saver write it on its thread: the next
        request runs at once. The file's own result (kind "save") follows when it is written."""
        from engine.session_write import snapshot

        session = self._need_session()
        snap = snapshot(session)
        ahead = self.saver.pending
        self.saver.submit(SaveJob(snap, request.path, request.generation))
        return self._result(request, p.Facts(path=request.path, steps=len(snap.records), branches=snap.n_branches, ahead=ahead))

    def _on_saver_written(self, job: SaveJob, path, error) -> None:
        """On the saver's thread: queue the report behind whatever this host is running."""
        if error is not None:
            self.again(p.SaveWritten(generation=job.tag, error=str(error)))
            return
        self.again(p.SaveWritten(generation=job.tag, path=str(path), size=path.stat().st_size,
                                 steps=len(job.snapshot.records), branches=job.snapshot.n_branches))

    def _saved(self, request: p.SaveWritten) -> p.SessionResult:
        if request.error:
            raise ExportError(request.error)
        r = request
        return self._result(request, p.Facts(path=r.path, size=r.size, steps=r.steps, branches=r.branches))

    def close(self) -> None:
        """Wait for the session files being written (quitting never loses a save)."""
        self.saver.close()

    def _open(self, request: p.OpenSession) -> p.SessionResult:
        from engine.session_read import open_session, read_session

        if self.session is not None:  # a refused file leaves the session as it was, with the person's settings
            keep_settings(self.session, request)
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
        facts = p.Facts(path=request.path, steps=len(session.tree), branches=len(session.branches().leaves()), note=note)
        return self._result(request, facts)

    def _refresh(self, request: p.Refresh) -> p.SessionResult:
        return self._result(request)

    def _reset(self, request: p.Reset) -> p.SessionResult:
        session = self._live_session()
        keep_settings(session, request)
        session.reset()
        return self._result(request)

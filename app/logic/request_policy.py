"""What to send to the engine, what to drop, when to give up: the controller's policy, in plain Python.

``SessionController`` (``app.window.controller``) adapts it to Qt signals; tests drive it with plain
lists (tests/app/test_request_policy.py, no QApplication).

- **One in flight.** Only one request runs at a time; the others wait here, in order. A play loop
  runs on in the engine after its first step is answered: the engine is idle only once it ends.
- **Coalescing.** A new Step, Resample, Choose, Inspect, Attribute, Tokenize, Patch, Compare or Switch replaces one of its kind still
  waiting last (a held-down Step key queues one step, not hundreds).
- **Stale results.** A restart (Load, SetPrompt, SetChat, Reset, OpenSession) drops everything
  waiting but a Load, a Save, new stop sequences and a prompt edit (see below), and raises the
  barrier: a result of an older request is stale. So does an engine's death, for everything it held.
- **Patching.** A restart while a Patch runs stops it at its next layer (``cancel_patch``): its map
  would be stale.
- **What the person typed.** A prompt edit (SetPrompt, SetChat) waiting is dropped only by a newer
  edit: a Load carries the editor's text but may be refused, and a Reset or a file opened would
  otherwise run the old prompt under the new text. A refusal of the newest edit is handed on even
  when a restart made it stale (the text in the editor cannot run: Step must say so); a dead
  engine's is not (the reload carries the editor's text).
- **Saves.** A waiting Save survives a restart. The engine answers a Save at once (the file is
  written on a thread of its own) and again with ``SaveWritten`` when the file is. A save is
  pending (``saves_pending``: quitting waits for it) only while its file will still be written: sent
  or waiting to be, or answered and not yet written; a refused Save, one dropped when the window
  closes and one a dead engine held are not. That the file was written is news even when a restart
  made it stale (``Verdict.NOTE``); so is a failure to write it.
- **Showing what the engine holds.** A refused restart already dropped the results before it; if
  one was dropped since the last result handed on, or the engine died since (the window still
  shows the dead engine's session), or the request was a Load or an OpenSession, the window shows
  a session the engine does not hold, so ``settle`` asks for a Refresh.
- **Results not drawn.** A result handed on may become stale before the window draws it (a
  restart sent meanwhile): the window then shows an older session (``not_drawn``), as after a drop.
- **Quick deaths.** An engine that dies within ``QUICK_DEATH_S`` of starting, ``MAX_QUICK_DEATHS``
  times in a row, is not started again.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from time import monotonic
from typing import Callable

from app.protocol import messages as p

QUICK_DEATH_S = 20.0  # an engine that dies sooner than this after it started died "quickly"
MAX_QUICK_DEATHS = 3  # after this many quick deaths in a row, stop restarting and ask the person


class Verdict(enum.Enum):
    """What to do with a reply ``RequestPolicy.settle`` has seen."""

    SHOW = enum.auto()  # hand it on: it is current
    DROP = enum.auto()  # stale: forget it
    NOTE = enum.auto()  # stale, but its news is not (a Save's file was written)
    REFRESH = enum.auto()  # hand on the refusal, then ask for the session as the engine holds it


class RequestPolicy:
    """Numbers requests, keeps one in flight, drops stale replies, counts quick engine deaths.

    ``send(request)`` hands a numbered request to the engine; ``control(name, value)`` sets one of
    ``protocol.CONTROLS`` there; ``clock()`` is seconds (``time.monotonic``)."""

    def __init__(self, send: Callable[[p.Request], None], control: Callable[[str, int], None], clock=monotonic):
        self.send, self.control, self.clock = send, control, clock
        self.generation = 0
        self.barrier = 0  # replies to requests older than this are stale
        self.in_flight: p.Request | None = None
        self.waiting: list[p.Request] = []
        self.play_generation = 0  # the play loop wanted (0 = none), mirrored in the engine
        self.loop = 0  # the play loop the engine may still run a step of (0 = none): see ``settle``
        self.has_session = False  # a load has succeeded in the running engine
        self.dead_barrier = 0  # requests older than this went to an engine that has died
        self.edit_generation = 0  # the newest prompt edit's: the person's text
        self.quick_deaths = 0
        self.forward_requests = 0  # Step and Play requests sent (tests and benchmarks read it)
        self.writing = 0  # Saves the engine accepted whose file is not yet written
        self.dropped = False  # the window may show a session the engine no longer holds
        self.started = clock()  # when the running engine started
        self.running = True  # False once the engine died quickly too often (nothing is sent)
        self.closed = False  # the window is closing: nothing more is queued

    @property
    def busy(self) -> bool:
        return self.in_flight is not None

    @property
    def idle(self) -> bool:
        """Nothing waits, nothing is in flight, and no play loop can still send a step."""
        return self.in_flight is None and not self.waiting and not self.loop

    @property
    def saves_pending(self) -> int:
        """Session files that will still be written: Saves waiting or in flight, and Saves the
        engine accepted whose file is not written yet (quitting waits for them)."""
        queued = [r for r in (self.in_flight, *self.waiting) if isinstance(r, p.SaveSession)]
        return len(queued) + self.writing

    def number(self, request: p.Request) -> p.Request:
        """``request`` with the next generation number."""
        self.generation += 1
        return replace(request, generation=self.generation)

    def add(self, request: p.Request) -> None:
        """Queue a numbered request (coalescing, dropping what it makes stale) and send one if idle
        (once closed, nothing is queued)."""
        if self.closed:
            return
        if isinstance(request, p.PROMPT_EDITS):
            self.edit_generation = request.generation
        if not isinstance(request, p.LOOKS):  # any other request ends a play loop
            self.set_play(request.generation if isinstance(request, p.Play) else 0)
        if isinstance(request, p.RESTARTS):
            self.barrier = request.generation
            self.control("latest_barrier", request.generation)
            if isinstance(self.in_flight, p.Patch):  # its map is of a session about to change: stop it at its next layer
                self.control("cancel_patch", self.in_flight.generation)
            keep = tuple(k for k in p.KEPT_ON_RESTART if not isinstance(request, k))  # a newer Load replaces a waiting one
            if not isinstance(request, p.PROMPT_EDITS):  # only newer text replaces the text typed
                keep += p.PROMPT_EDITS
            self.waiting = [r for r in self.waiting if isinstance(r, keep)]
        elif isinstance(request, p.COALESCING) and self.waiting and type(self.waiting[-1]) is type(request):
            self.waiting[-1] = request
            return
        self.waiting.append(request)
        self.dispatch()

    def set_play(self, generation: int) -> None:
        """The play loop wanted: ``generation`` (a Play request's), 0 for none."""
        if generation != self.play_generation:
            self.play_generation = generation
            if self.running:
                self.control("play_generation", generation)

    def dispatch(self) -> None:
        if self.in_flight is not None or not self.waiting or not self.running:
            return
        self.in_flight = self.waiting.pop(0)
        if isinstance(self.in_flight, (p.Step, p.Play)):
            self.forward_requests += 1
        if isinstance(self.in_flight, p.Play):
            self.loop = self.in_flight.generation
        self.send(self.in_flight)

    def is_current(self, result) -> bool:
        """False once ``result`` (anything with a ``generation``) is stale: a newer restart, or the
        engine that made it has died."""
        return result.generation >= self.barrier

    def settle(self, reply: p.Reply) -> Verdict:
        """Mark the request ``reply`` answers done, send the next one, and say what to do with it.
        (A dead engine's replies that were queued before its death was known are all older than the
        barrier its death set, so they are stale.)"""
        if self.in_flight is not None and self.in_flight.generation == reply.generation:
            self.in_flight = None
        if reply.generation == self.loop and self._ends_loop(reply):
            self.loop = 0
        self.dispatch()
        current = self.is_current(reply)
        request = reply.result.request if isinstance(reply, p.Finished) else getattr(reply, "request", None)
        if isinstance(request, p.SaveSession) and isinstance(reply, p.Finished):  # accepted: its file follows
            self.writing += 1
        if isinstance(request, p.SaveWritten):  # the file is written, or could not be
            self.writing = max(0, self.writing - 1)
        if isinstance(request, p.SaveWritten) and isinstance(reply, p.Failed):
            return Verdict.SHOW  # news whatever the window shows now
        if isinstance(reply, p.Finished):
            opened = isinstance(reply.result.request, (p.Load, p.OpenSession))
            if opened and (current or reply.generation >= self.dead_barrier):
                self.has_session = True  # this engine has a session (even if a newer request made it stale)
                self.quick_deaths = 0  # and it works
            if not current:
                self.dropped = True
                return Verdict.NOTE if isinstance(request, (p.SaveSession, p.SaveWritten)) else Verdict.DROP
            self.dropped = False
            return Verdict.SHOW
        if not current:
            return Verdict.SHOW if self._refused_text(reply) else Verdict.DROP
        if isinstance(reply, p.Failed) and isinstance(reply.request, p.RESTARTS) and self.has_session:
            if self.dropped or isinstance(reply.request, (p.Load, p.OpenSession)):
                return Verdict.REFRESH
        return Verdict.SHOW

    @staticmethod
    def _ends_loop(reply: p.Reply) -> bool:
        """A play loop's reply after which the engine runs no more of it: its next turn skipped (a
        pause or a newer request reached it: a step it had begun was answered first), a step that
        stopped generation, or a failure. (Its first reply frees ``in_flight``: the loop goes on.)"""
        return not isinstance(reply, p.Finished) or bool(getattr(reply.result, "stopped", False))

    def not_drawn(self) -> bool:
        """A result handed on was not drawn (stale by its frame): the window shows an older session
        than the engine's. Returns True when a Refresh must ask for it now: nothing is on its way
        (a refused restart on its way asks for one itself) and the engine holds a session (a fresh
        engine after a death has none: the reload's result replaces what is drawn)."""
        self.dropped = True
        return self.idle and self.running and not self.closed and self.has_session

    def _refused_text(self, reply: p.Reply) -> bool:
        """``reply`` refuses the newest text the person typed, sent to the engine that runs now."""
        return (isinstance(reply, p.Failed) and isinstance(reply.request, p.PROMPT_EDITS)
                and reply.generation >= max(self.edit_generation, self.dead_barrier))

    def engine_died(self) -> bool:
        """The engine died: everything it held is gone. Returns False when it died quickly too often
        (do not start another until ``engine_started``)."""
        lived = self.clock() - self.started
        self.waiting.clear()
        self.in_flight = None
        self.play_generation = self.loop = 0
        self.has_session = False
        self.writing = 0  # a file it was writing is gone (the old one, if any, is whole)
        self.dropped = True  # the window shows the dead engine's session until a result replaces it
        self.barrier = self.dead_barrier = self.generation + 1
        self.quick_deaths = self.quick_deaths + 1 if lived < QUICK_DEATH_S else 0
        self.running = self.quick_deaths < MAX_QUICK_DEATHS
        return self.running

    def engine_started(self, *, by_person: bool = False) -> None:
        """A fresh engine runs (``by_person``: the person asked to try again: the count starts over)."""
        if by_person:
            self.quick_deaths = 0
        self.started, self.running = self.clock(), True

    def close(self) -> None:
        """Nothing more is sent (what waits is dropped; what is in flight still finishes)."""
        self.closed = True
        self.waiting.clear()
        self.play_generation = self.loop = 0  # nothing waits for the loop's end: the engine stops
        self.running = False

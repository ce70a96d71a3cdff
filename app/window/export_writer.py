"""The thread that finishes exports: encodes and writes files so the window's event loop never waits.

A history table recomputes every step's distribution (about 3 ms a step at GPT-2's vocabulary) and a
window's PNG takes 100-350 ms to encode: both would hold the event loop. The window takes what must be
taken on the GUI thread (the picture as it looks now, the result as it was asked for: frozen, its
arrays never mutated) and hands the rest to ``ExportWriter`` as a job, a plain function that returns
a ``Written``. Jobs run one after another on one thread; each ``Written`` comes back to the GUI
thread through ``written``. Qt allows this: QImage is reentrant and encoding one releases the GIL.
Quitting waits for the jobs still running (``pending`` says which, ``close`` waits), as it waits for
a session file, but ``CLOSE_WAIT_S`` at most: a job that hangs (a network drive that stopped
answering) is left behind on its daemon thread, which never holds up the process's exit, and the
window says so. Files are replaced whole or not at all (``app.window.pictures``, ``app.logic.tables``), so an
older file at that path stays as it was.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0  # how long quitting waits for the exports still being written


@dataclass(frozen=True)
class Written:
    """What one export came to. ``what``: its words for the status line ("the history table", "a
    picture of the window"); ``detail``: what was written ("3 rows", "PNG, 2,732 × 1,536 pixels");
    ``error``: the exception that stopped it (None when ``path`` was written)."""

    what: str
    path: Path
    detail: str = ""
    error: Exception | None = None


class ExportWriter(QObject):
    """One long-lived worker thread for export jobs (created at the first), so the GUI thread
    never encodes or computes a file; ``written`` carries each job's ``Written`` back to it. A
    daemon thread, not a pool's: the interpreter joins a pool's threads at exit, so one job that
    never ends would keep the quitting app alive."""

    written = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs: queue.SimpleQueue | None = None  # callables for the thread; None ends it
        self._thread: threading.Thread | None = None
        self._pending: list[str] = []  # the ``what`` of each job submitted and not yet ended, in order
        self._lock = threading.Lock()

    @property
    def pending(self) -> tuple[str, ...]:
        """What the jobs queued or running will write ("a picture of the window"), oldest first."""
        with self._lock:
            return tuple(self._pending)

    def submit(self, job: Callable[[], Written], what: str) -> None:
        """Run ``job`` after the jobs before it; ``what`` names its file for ``pending``."""
        with self._lock:
            self._pending.append(what)
        if self._thread is None:
            self._jobs = queue.SimpleQueue()
            self._thread = threading.Thread(target=_work, args=(self._jobs,), name="nexttoken-export", daemon=True)
            self._thread.start()
        self._jobs.put(lambda: self._run(job, what))

    def wait(self) -> None:
        """Block until every job submitted so far has ended (tests)."""
        if self._jobs is not None:
            done = threading.Event()
            self._jobs.put(done.set)
            done.wait()

    def close(self, timeout: float | None = None) -> tuple[str, ...]:
        """Wait for every job submitted to end, ``timeout`` seconds at most (default ``CLOSE_WAIT_S``),
        and stop the thread (quitting). Returns what was still being written when the wait ran out
        (logged; its thread is left to finish or to die with the process), () when everything was.
        Safe to call twice; a later ``submit`` starts a new thread."""
        thread, jobs = self._thread, self._jobs
        self._thread = self._jobs = None
        if thread is None:
            return ()
        wait = CLOSE_WAIT_S if timeout is None else timeout
        jobs.put(None)
        thread.join(wait)
        if not thread.is_alive():
            return ()
        left = self.pending
        log.warning("quitting: %s was still being written after %.1f s; not waiting for it", " and ".join(left), wait)
        return left

    def _run(self, job: Callable[[], Written], what: str) -> None:
        try:
            outcome = job()
        finally:
            with self._lock:
                self._pending.remove(what)
        try:
            self.written.emit(outcome)  # queued to the GUI thread
        except RuntimeError:  # the window closed meanwhile: the file is written, nobody left to tell
            log.info("export finished after the window closed: %s", outcome)


def _work(jobs: queue.SimpleQueue) -> None:
    """The export thread: run each job in turn until the None that ``close`` puts."""
    while (job := jobs.get()) is not None:
        try:
            job()
        except Exception:  # a job's own failure is its Written; this is a defect: logged, the next job runs
            log.exception("export job failed")

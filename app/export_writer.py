"""The thread that finishes exports: encodes and writes files so the window's event loop never waits.

A history table recomputes every step's distribution (about 3 ms a step at GPT-2's vocabulary) and a
window's PNG takes 100-350 ms to encode: both would hold the event loop. The window takes what must be
taken on the GUI thread (the picture as it looks now, the result as it was asked for: frozen, its
arrays never mutated) and hands the rest to ``ExportWriter`` as a job, a plain function that returns
a ``Written``. Jobs run one after another on one thread; each ``Written`` comes back to the GUI
thread through ``written``. Qt allows this: QImage is reentrant and encoding one releases the GIL.
Quitting waits for the jobs still running (``pending`` says which, ``close`` waits), as it waits for
a session file: a file the person asked for is never cut short or lost.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)


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
    never encodes or computes a file; ``written`` carries each job's ``Written`` back to it."""

    written = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._pool: ThreadPoolExecutor | None = None  # joined at exit: a file is never cut short
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
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nexttoken-export")
        self._pool.submit(self._run, job, what)

    def wait(self) -> None:
        """Block until every job submitted so far has ended (tests)."""
        if self._pool is not None:
            self._pool.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for every job submitted to end, then stop the thread (quitting). Safe to call twice;
        a later ``submit`` starts a new thread."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

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

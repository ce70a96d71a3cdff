"""Session files written on a thread of the engine's process, so that Step stays live meanwhile. No Qt.

The session host takes a snapshot (``engine.session_write.snapshot``: cheap, the records are
immutable) on its own thread and hands it here; one writer thread writes the snapshots in the order
they came (a second Save waits behind the first) and reports each as done. Writing a 1,000-step
GPT-2-small session takes seconds (compressing and fsyncing 400 MB); the session is never touched
from this thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.errors import ExportError
from engine.session_write import SessionSnapshot, write_snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SaveJob:
    """One save: the snapshot, where it goes, and ``tag`` (the request's generation) for the report."""

    snapshot: SessionSnapshot
    path: str
    tag: int


class Saver:
    """Writes SaveJobs one after another on one long-lived thread (started at the first save).

    ``done(job, path, error)`` is called on the writer thread after each job: the file written, or
    the ExportError of one line that says why not. ``close`` waits for every job queued, then ends
    the thread: quitting never loses a file the person saved.
    """

    def __init__(self, done: Callable[[SaveJob, Path | None, ExportError | None], None],
                 write: Callable[[SessionSnapshot, str], Path] = write_snapshot):
        self._done, self._write = done, write
        self._jobs: queue.Queue[SaveJob | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        """Saves queued or being written."""
        return self._pending

    def submit(self, job: SaveJob) -> None:
        with self._lock:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nexttoken-saver")
                self._thread.start()
        self._jobs.put(job)

    def close(self) -> None:
        """Wait for every queued save to be written, then stop the thread. Safe to call twice."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            path, error = None, None
            try:
                path = self._write(job.snapshot, job.path)
            except ExportError as exc:
                error = exc
            except Exception as exc:  # a bug, not a full disk: say so, keep the thread for the next save
                log.exception("writing %s failed", job.path)
                error = ExportError(f"Could not write {job.path}: unexpected {type(exc).__name__}: {exc}")
            with self._lock:
                self._pending -= 1
            try:
                self._done(job, path, error)
            except Exception:
                log.exception("reporting the save of %s failed", job.path)

"""The session host in a child process: the default engine.

Why a process: a forward pass in a thread of the window's process holds Python's interpreter lock
between its hundreds of small torch calls, and pyqtgraph's painting holds it too, so each waited
for the other (measured: Play reached 55-59 % of the bare model and the event loop stalled up to
79 ms; see benchmarks/RESULTS_GUI.md). In its own process the model has a lock to itself and the
window paints on a free core.

Parent side (``EngineProcess``, a QObject in the window's process): requests and control values
go down one pipe; a reader thread emits each reply that comes up the other pipe as ``replied``
(the signals of ``app.window.engine_link.Engine``, shared with ``EngineThread``). Replies cross through
``app.protocol.wire``, which sends each step's record once.
Child side: ``app.host.serve``.

Started with "spawn" on every platform (forking a process that runs Qt and torch threads is
unsafe); a frozen build needs ``multiprocessing.freeze_support()`` first thing in its entry point.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.host import torch_threads
from app.window.engine_link import Engine
from app.host.serve import serve

if TYPE_CHECKING:  # this module imports no torch, so that ``prestart`` can run before anything heavy
    from app.protocol.messages import Request

log = logging.getLogger(__name__)

QUIT_GRACE_S = 3.0  # after this a closing window stops the engine by force (a download, a long prefill)

_spare = None  # a child started by ``prestart``, not yet taken by an EngineProcess


def prestart(threads: int | None = None) -> None:
    """Start the engine process now: it imports torch and transformers (seconds) while the window's
    process imports Qt and builds the window, instead of after. The first EngineProcess takes it."""
    global _spare
    if _spare is None:
        _spare = _spawn(threads)


def _spawn(threads: int | None):
    """(process, requests sending end, results receiving end), the child started."""
    if threads is None:
        threads = torch_threads.ENGINE_TORCH_THREADS
    ctx = multiprocessing.get_context("spawn")
    requests_in, requests = ctx.Pipe(duplex=False)
    results, results_out = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=serve,
        args=(requests_in, results_out, threads),
        name="nexttoken-engine",
        daemon=True,  # never outlives the window's process
    )
    process.start()
    requests_in.close(), results_out.close()  # only the child holds these: its exit closes the pipe
    return process, requests, results


class EngineProcess(Engine):
    """Runs a SessionHost in a child process; ``shutdown`` ends it."""

    def __init__(self, parent: QObject | None = None, threads: int | None = None):
        """``threads``: torch threads in the child (default: ``torch_threads.ENGINE_TORCH_THREADS``)."""
        super().__init__(parent)
        from app.protocol.wire import Receiver

        global _spare
        if _spare is not None and threads is None and _spare[0].is_alive():
            (self.process, self._requests, results), _spare = _spare, None
        else:
            self.process, self._requests, results = _spawn(threads)
        self._receiver = Receiver(results)
        self._closing = False
        self._reader = threading.Thread(target=self._read, name="nexttoken-engine-reader", daemon=True)
        self._reader.start()

    # ----------------------------------------------------------- to the child
    def submit(self, request: "Request") -> None:
        self._post(("request", request))

    def set_control(self, name: str, value: int) -> None:
        """Set one of ``protocol.CONTROLS`` on the host now, even while a request runs."""
        self._post(("set", name, value))

    def _post(self, message) -> None:
        try:
            self._requests.send(message)
        except (OSError, ValueError):  # the child is gone: the reader reports it (or we are closing)
            log.debug("engine process unreachable; dropped %s", message[0])

    # ---------------------------------------------------------- from the child
    def _read(self) -> None:
        """Reader thread: each reply from the child is emitted as ``replied`` (queued to the GUI thread)."""
        try:
            while True:
                self.replied.emit(self._receiver.recv())
        except (EOFError, OSError):
            pass
        except RuntimeError:  # this QObject was deleted: the window is gone
            return
        except Exception:  # a message that cannot be read: both sides' memory of what was sent is lost
            log.exception("unreadable message from the engine process; starting a new one")
            self.process.kill()
        if self._closing:
            return
        self.process.join(5)
        code = self.process.exitcode
        log.error("the engine process ended unexpectedly (exit code %s)", code)
        try:
            self.died.emit(code)
        except RuntimeError:
            pass

    # ---------------------------------------------------------------- closing
    def shutdown(self, grace_s: float = QUIT_GRACE_S) -> None:
        """End the child: at once if idle, after ``grace_s`` by force if it is busy (a session file
        being written gets longer: the controller passes ``SAVE_GRACE_S``)."""
        if self._closing:
            return
        self._closing = True
        self._post(("quit",))
        self.process.join(grace_s)
        if self.process.is_alive():
            log.warning("the engine process is still busy after %.0f s; stopping it", grace_s)
            self.process.terminate()
            self.process.join(5)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self._requests.close()
        self._reader.join(5)


# The engine process runs at a lower priority than the window: when both want a core, the window's
# paint goes first (the window needs little CPU; the model gets what is left). Longest event-loop
# gap in 8 Plays each, interleaved: 18-192 ms (median 37) at equal priority, 19-43 ms (median 28) at 5.

"""The engine process's side of ``app.window.engine_process``: ``serve`` runs in the child process.

A reader thread queues requests and applies control values at once (a pause or a newer reset must
reach a play loop or a download while it runs); the main thread runs the queued requests on a
``SessionHost``, one at a time; a writer thread sends the replies up through ``app.protocol.wire``, which
sends each step's record once. Imports no Qt; torch and the session host are imported in ``serve``,
in the child, so that the window's process can name ``serve`` without loading them.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from typing import TYPE_CHECKING

from engine.logs import setup_logging

if TYPE_CHECKING:  # the window's process names ``serve`` before it has imported anything heavy
    from app.protocol.messages import Request

log = logging.getLogger(__name__)

ENGINE_NICENESS = 5


def serve(requests, results, threads: int) -> None:
    """The engine process: run requests from ``requests`` until "quit" or the window's end."""
    setup_logging()
    import torch

    from app.protocol.messages import Finished
    from app.host.session_host import SessionHost
    from app.protocol.wire import Sender

    torch.set_num_threads(threads)
    if hasattr(os, "nice"):  # POSIX; Windows keeps the normal priority
        os.nice(ENGINE_NICENESS)
    inbox: queue.Queue[Request | None] = queue.Queue()
    outbox: queue.Queue[tuple | None] = queue.Queue()
    sender = Sender(results)
    encode_lock = threading.Lock()  # a download may report progress from its own threads

    def emit(reply) -> None:
        with encode_lock:  # a Finished result refers to everything still wanted
            outbox.put(sender.encode(reply, prune=isinstance(reply, Finished)))

    def write() -> None:
        """Writer thread: the pipe holds 64 KiB and a step's result is about 1 MB, so writing waits
        for the window's reader; the next step need not."""
        try:
            while (packet := outbox.get()) is not None:
                sender.write(packet)
        except OSError:  # the window's process is gone
            pass

    host = SessionHost(emit, inbox.put)

    def read() -> None:
        try:
            while True:
                message = requests.recv()
                if message[0] == "request":
                    inbox.put(message[1])
                elif message[0] == "set":
                    try:
                        host.set_control(message[1], message[2])
                    except ValueError:
                        log.exception("ignored a control message")
                else:  # "quit"
                    break
        except (EOFError, OSError):  # the window's process is gone
            pass
        host.cancelled, host.play_generation = True, 0
        inbox.put(None)

    threading.Thread(target=read, name="nexttoken-engine-requests", daemon=True).start()
    writer = threading.Thread(target=write, name="nexttoken-engine-results")
    writer.start()
    while (request := inbox.get()) is not None:
        if host.cancelled:
            break
        host.handle(request)
    host.close()  # a session file being written is finished first
    outbox.put(None)
    writer.join()
    results.close()
    # Everything the window needs is written; skip the interpreter's teardown (torch's took about
    # 2.5 s here, which a closing window waited for, and past engine_process.QUIT_GRACE_S on a busy machine).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

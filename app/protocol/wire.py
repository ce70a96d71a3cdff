"""Messages between the window's process and the engine process, each shared object sent once.

A result holds the whole history (every StepRecord), but only the newest step is new. ``Sender``
pickles a message with a memory of what the other side already holds: a StepRecord, a ModelInfo or
an array already sent crosses as a short reference, and ``Receiver`` hands back the very
object it unpickled the first time. So a decode step costs only its own record on the wire, and the
window's caches keyed on identity (``AttentionHistory``, the panels' ``info is`` checks) keep
working across processes. Arrays travel out of band (pickle protocol 5): the pickle holds only their
headers and each array's bytes are written from the array itself and read into a buffer of their
own, so a long prefill's record is never copied into a pickle on either side (at 8,192 positions
its residual stream alone is 585 MB at SmolLM2's shape). After each message the sender forgets, on both sides, every object that
message no longer referred to (a rewound step, a replaced model). Pure Python, no Qt.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import fields

import numpy as np

from engine.info import ModelInfo
from engine.trace import StepRecord

SHARED = (StepRecord, ModelInfo, np.ndarray)


class Sender:
    """Writes messages to a ``multiprocessing`` connection: ``encode`` one, then ``write`` it.

    The two may run on different threads (each on one at a time), so that a producer never waits
    for the reader to drain the pipe."""

    def __init__(self, conn):
        self._conn = conn
        self._keys: dict[int, int] = {}  # id(obj) -> key, for every object the receiver holds
        self._objects: dict[int, object] = {}  # key -> obj (keeps each id valid while remembered)
        self._next_key = 0

    def write(self, packet: tuple[bytes, list[pickle.PickleBuffer], list[int]]) -> None:
        """Write one ``encode`` packet; packets must be written in the order they were encoded."""
        data, buffers, dropped = packet
        views = [b.raw() for b in buffers]
        self._conn.send_bytes(data)
        self._conn.send(([v.nbytes for v in views], dropped))
        for view in views:
            self._conn.send_bytes(view)

    def encode(self, message, *, prune: bool = False) -> tuple[bytes, list[pickle.PickleBuffer], list[int]]:
        """Pickle ``message`` (its arrays' bytes kept aside, not copied). ``prune``: it refers to
        everything still wanted (a whole result), so forget whatever it does not refer to."""
        used: set[int] = set()
        pending: set[int] = set()  # objects whose first copy is being pickled right now

        def persistent_id(obj):
            if not isinstance(obj, SHARED):
                return None
            oid = id(obj)
            if oid in pending:  # the copy inside ("new", key, obj) itself
                pending.discard(oid)
                return None
            key = self._keys.get(oid)
            if key is not None:
                used.add(key)
                return ("ref", key)
            key = self._next_key
            self._next_key += 1
            self._keys[oid], self._objects[key] = key, obj
            used.add(key)
            pending.add(oid)
            return ("new", key, obj)

        buffer, buffers = io.BytesIO(), []
        pickler = pickle.Pickler(buffer, protocol=5, buffer_callback=buffers.append)
        pickler.persistent_id = persistent_id
        pickler.dump(message)
        dropped = self._prune(used) if prune else []
        return buffer.getvalue(), buffers, dropped

    def _prune(self, used: set[int]) -> list[int]:
        keep = set(used)
        for key in used:  # a record sent as a reference still holds its arrays
            obj = self._objects[key]
            if isinstance(obj, StepRecord):
                for f in fields(obj):
                    k = self._keys.get(id(getattr(obj, f.name)))
                    if k is not None:
                        keep.add(k)
        dropped = [k for k in self._objects if k not in keep]
        for key in dropped:
            del self._keys[id(self._objects.pop(key))]
        return dropped

    @property
    def remembered(self) -> int:
        """How many objects both sides hold now (tests read it)."""
        return len(self._objects)


class Receiver:
    """Reads what a ``Sender`` wrote; one thread receives. ``recv`` raises EOFError once the
    other end has closed."""

    def __init__(self, conn):
        self._conn = conn
        self._objects: dict[int, object] = {}

    def recv(self):
        data = self._conn.recv_bytes()
        sizes, dropped = self._conn.recv()
        buffers = []
        for size in sizes:  # each array's own bytes, writable as an unpickled array's are
            buffer = bytearray(size)
            if size:
                self._conn.recv_bytes_into(buffer)
            else:
                self._conn.recv_bytes()
            buffers.append(buffer)
        unpickler = pickle.Unpickler(io.BytesIO(data), buffers=buffers)
        unpickler.persistent_load = self._load
        message = unpickler.load()
        for key in dropped:
            self._objects.pop(key, None)
        return message

    def _load(self, pid):
        if pid[0] == "new":
            _, key, obj = pid
            self._objects[key] = obj
            return obj
        return self._objects[pid[1]]

    @property
    def remembered(self) -> int:
        return len(self._objects)

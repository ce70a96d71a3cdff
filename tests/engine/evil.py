"""A .npz holding a pickled object that runs a command when unpickled: every reader must refuse it."""

from __future__ import annotations

import os

import numpy as np


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_pickle_bomb(path, arrays: dict, key: str, marker) -> None:
    """``arrays`` with ``key`` replaced by an object array whose unpickling creates ``marker``."""
    np.savez(path, **dict(arrays, **{key: np.array([Evil(marker)], dtype=object)}))

"""torch's compile-cache folder: one of this run's own, removed when the window's process exits.

Importing transformers imports ``torch._dynamo``, which creates ``<temp>/torchinductor_<user>`` at
import time (torch 2.13) although nexttoken never compiles anything: every start left that empty
folder in the temporary directory. ``use_own_cache()`` points TORCHINDUCTOR_CACHE_DIR, before the
engine starts, at a temporary folder that this process removes at exit; the engine's process inherits
the variable (and ``--engine thread`` reads it here). A TORCHINDUCTOR_CACHE_DIR already set is kept.
Plain Python, no torch.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def use_own_cache() -> str | None:
    """Set VARIABLE to a new temporary folder removed at exit; return it (None: the user had set one)."""
    if os.environ.get(VARIABLE):
        return None
    folder = tempfile.mkdtemp(prefix="nexttoken-torch-")
    os.environ[VARIABLE] = folder
    atexit.register(shutil.rmtree, folder, True)
    return folder

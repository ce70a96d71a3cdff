"""Progress bars and advisory warnings of tqdm, huggingface_hub and transformers, switched off in
one place: they write to stderr, which a windowed build does not have. Imports nothing heavy.

``QUIET_ENV`` is read by those libraries when they are imported; ``silence_libraries`` also switches
off the ones already imported. A model download's own progress callback bar (``engine.loading``)
sets ``disable=False`` itself, so the window's download progress still works.
"""

from __future__ import annotations

import os
import sys

QUIET_ENV = {
    "TQDM_DISABLE": "1",  # tqdm >= 4.66 reads TQDM_* as defaults for its keyword arguments
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub, and transformers' bars follow it
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


def silence_libraries() -> None:
    """Set ``QUIET_ENV`` (where not set) and switch off the bars of libraries already imported."""
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:
        hub.utils.disable_progress_bars()
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()

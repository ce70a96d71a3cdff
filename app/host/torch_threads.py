"""How many torch threads the engine gets: every core but one, which stays free for the window.

With the window painting on a core torch also wants, torch's thread team waits on its slowest
member and a step ran several times slower (measured on 2 cores: see benchmarks/RESULTS_GUI.md).
Read when an engine starts (a benchmark may set it first). Imports nothing heavy.
"""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


ENGINE_TORCH_THREADS = max(1, cores() - 1)

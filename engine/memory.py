"""Handing freed heap memory back to the operating system (glibc only; a no-op elsewhere)."""

from __future__ import annotations

import ctypes
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's malloc_trim, or None on other C libraries (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Return free heap pages to the OS.

    Each decode step the KV cache reallocates every layer's keys and values one position longer,
    and the step's record (about 0.4 MB) lands in the holes the old ones left. glibc keeps the
    remaining holes resident: without this, a 1,000-step session on GPT-2 small held about 1.3 GB
    of freed memory on top of its 0.4 GB history. A call takes a few milliseconds (8 ms after 600
    steps, measured), the session calls it once every TRIM_EVERY steps.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


# ------------------------------------------------------------------ what a prefill will need
MARGIN = 0.8  # the share of the machine's free memory a pass may plan to use (the window and others need some)


def available_bytes() -> int | None:
    """The memory the machine can still give without swapping (Linux's MemAvailable), or None
    where that is not known (the check is then skipped)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def bytes_per_position(info, d_mlp: int) -> int:
    """What each position of a prefill adds to the engine's peak, in bytes (float32 values): its
    record's residual stream and embeddings, the hooked block outputs they are copied from, the KV
    cache, the MLP's and attention's temporaries of the pass, and its share of the kept attention rows
    (24 sampled rows of every head in float16, float32 while computed). Measured against
    benchmarks/bench_memory.py; the P x P patterns are never built."""
    from .trace import SAMPLED_ROWS

    L, d = info.n_layer, info.d_model
    kv = info.kv_widths()[0] or d
    values = 2 * (L + 1) * d + 2 * d + 2 * L * kv + 4 * d_mlp + 6 * d
    return 4 * values + 6 * SAMPLED_ROWS * L * info.n_head


def positions_that_fit(info, d_mlp: int, free: int | None) -> int:
    """How many prompt positions a prefill can take in ``free`` bytes (the model's context when unknown)."""
    if free is None:
        return info.n_positions
    return max(1, min(info.n_positions, int(free * MARGIN) // bytes_per_position(info, d_mlp)))

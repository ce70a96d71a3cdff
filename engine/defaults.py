"""What the window and the terminal start with, in one place. Imports no torch."""

from __future__ import annotations

from .sampling import SamplingSettings

DEFAULT_PROMPT = "The cat sat on the"

def truncation_keeps(capacity: int) -> int:
    """How many tokens "keep only the last tokens" keeps of a too-long prompt for a model reading
    ``capacity`` positions: the window less room to generate, a quarter of it or 32 tokens
    (at most half of a window shorter than 64). Keeping all ``capacity`` left room for one token."""
    room = max(capacity // 4, min(32, capacity // 2))
    return max(1, capacity - room)


DEFAULT_SETTINGS = SamplingSettings()
"""Sampling at temperature 1 with top-k 50 (``SamplingSettings``' defaults, Hugging Face ``generate``'s), seed 0."""

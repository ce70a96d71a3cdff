"""What the window and the terminal start with, in one place. Imports no torch."""

from __future__ import annotations

from .sampling import SamplingSettings

DEFAULT_PROMPT = "The cat sat on the"

DEFAULT_SETTINGS = SamplingSettings(top_k=50, seed=0)
"""Sampling from the whole vocabulary, a small model often draws tokens of almost no probability;
top-k 50 is also Hugging Face ``generate``'s default."""

"""What the window and the terminal start with, in one place. Imports no torch."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .errors import SettingsError
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


GENERATION_KEYS = ("do_sample", "temperature", "top_k", "top_p", "repetition_penalty")
"""The sampling values a model folder's ``generation_config.json`` may set, as Hugging Face names them."""


def read_generation_config(folder) -> tuple[tuple[str, object], ...]:
    """The ``GENERATION_KEYS`` that ``folder``'s ``generation_config.json`` sets, in that order
    (none without the file, or when it cannot be read): the facts ``model_settings`` turns into settings."""
    path = Path(folder) / "generation_config.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    if not isinstance(found, dict):
        return ()
    return tuple((key, found[key]) for key in GENERATION_KEYS if isinstance(found.get(key), (bool, int, float, type(None))) and key in found)


def model_settings(generation: tuple[tuple[str, object], ...], base: SamplingSettings = DEFAULT_SETTINGS) -> SamplingSettings:
    """The settings a model starts with, from its ``generation_config.json`` values (``read_generation_config``),
    by ``generate``'s rules: with ``do_sample`` true it samples with the file's temperature, top-k, top-p
    and repetition penalty, each unset one at ``generate``'s default (1, 50, 1, 1); with ``do_sample``
    false it is greedy (the penalty still applies). Without ``do_sample`` (``generate`` would be greedy
    and ignore the rest) the window keeps ``base``, its own defaults, so that every step shows a draw.
    Values outside the allowed ranges leave ``base`` too. The seed is always ``base``'s."""
    values = dict(generation)
    sample = values.get("do_sample")
    if sample is not True and sample is not False:
        return base

    def given(name: str, unset):
        value = values.get(name)
        return unset if value is None else value

    try:
        penalty = float(given("repetition_penalty", 1.0))
        if sample is False:
            return replace(base, greedy=True, repetition_penalty=penalty)
        return replace(base, greedy=False, temperature=float(given("temperature", 1.0)), top_k=int(given("top_k", 50)),
                       top_p=float(given("top_p", 1.0)), repetition_penalty=penalty)
    except (SettingsError, TypeError, ValueError):
        return base

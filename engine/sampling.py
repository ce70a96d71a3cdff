"""Sampling: turn one step's raw logits into a distribution, stage by stage, and draw a token.

The stages run in the order Hugging Face ``generate`` uses: repetition penalty, temperature,
top-k, top-p, softmax. Each stage is kept so the window can show what it did. Everything is
numpy on one vector of ``V`` logits; no forward pass is needed to re-sample under new settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import SettingsError

NEG_INF = np.float32(-np.inf)


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen.

    greedy: always take the highest (penalised) logit; temperature 0 means the same.
    temperature: divide logits by it, in (0, 100]; 0 means greedy.
    top_k: keep the k highest logits, 0 means off.
    top_p: keep the smallest set of tokens whose probability reaches p, in (0, 1]; 1 means off.
    repetition_penalty: in [1, 10]; for tokens already in the context positive logits are divided by
        it and negative ones multiplied (1 means off).
    seed: None for a fresh random draw every time, or an int in [0, 2**32) to replay exactly.
    """

    greedy: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = 0

    def __post_init__(self):
        validate(self)

    @property
    def is_greedy(self) -> bool:
        return self.greedy or self.temperature == 0

    def describe(self) -> str:
        if self.is_greedy:
            parts = ["greedy"]
        else:
            parts = [f"temperature {self.temperature:g}"]
            if self.top_k:
                parts.append(f"top-k {self.top_k}")
            if self.top_p < 1:
                parts.append(f"top-p {self.top_p:g}")
        if self.repetition_penalty != 1:
            parts.append(f"repetition penalty {self.repetition_penalty:g}")
        if not self.is_greedy:
            parts.append("unseeded" if self.seed is None else f"seed {self.seed}")
        return ", ".join(parts)


MIN_TEMPERATURE = 1e-3  # below ~1e-37, logits / temperature overflows float32 and every probability is NaN
RANGES = {
    "temperature": (0.0, 100.0),
    "top_k": (0, 1_000_000),
    "top_p": (0.0, 1.0),
    "repetition_penalty": (1.0, 10.0),
    "seed": (0, 2**32 - 1),
}


def validate(s: SamplingSettings) -> None:
    """Raise SettingsError naming the allowed range of the first bad setting."""

    def bad(name: str, rule: str):
        value = getattr(s, name)
        raise SettingsError(f"{name.replace('_', ' ')} must be {rule} (got {value!r})", name, rule, value)

    if not isinstance(s.greedy, (bool, np.bool_)):
        bad("greedy", "true or false")
    for name in ("temperature", "top_p", "repetition_penalty"):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            bad(name, "a number")
        if not math.isfinite(value):
            bad(name, "a finite number")
    if not (s.temperature == 0 or MIN_TEMPERATURE <= s.temperature <= 100):
        bad("temperature", f"between 0 and 100 (0 means greedy; the smallest other value is {MIN_TEMPERATURE:g})")
    if not 0 < s.top_p <= 1:
        bad("top_p", "greater than 0 and at most 1 (1 means off)")
    if not 1 <= s.repetition_penalty <= 10:
        bad("repetition_penalty", "between 1 and 10 (1 means off)")
    if isinstance(s.top_k, bool) or not isinstance(s.top_k, (int, np.integer)) or s.top_k < 0:
        bad("top_k", "a whole number, 0 or more (0 means off)")
    if s.seed is not None and (
        isinstance(s.seed, bool) or not isinstance(s.seed, (int, np.integer)) or not 0 <= s.seed < 2**32
    ):
        bad("seed", f"a whole number from 0 to {2**32 - 1}, or empty for unseeded")


@dataclass(frozen=True)
class Distribution:
    """One step's logits after each sampling stage, each float32 [V]; removed tokens are -inf.

    after_penalty: raw logits with the repetition penalty applied.
    after_temperature: divided by the temperature (equal to after_penalty when greedy).
    after_top_k / after_top_p: with the tokens each filter removed set to -inf.
    probs: the final distribution the token is drawn from (softmax of after_top_p); when greedy,
        softmax of after_penalty, and the token is its argmax.
    """

    settings: SamplingSettings
    after_penalty: np.ndarray
    after_temperature: np.ndarray
    after_top_k: np.ndarray
    after_top_p: np.ndarray
    probs: np.ndarray

    @property
    def kept(self) -> np.ndarray:
        """bool [V]: tokens that survive top-k and top-p."""
        return np.isfinite(self.after_top_p)

    def entropy_bits(self) -> float:
        return entropy_bits(self.probs)

    def top(self, n: int, by: np.ndarray | None = None) -> np.ndarray:
        """Indices of the n largest values of ``by`` (default: final probs), largest first."""
        values = self.probs if by is None else by
        n = min(n, values.shape[0])
        idx = np.argpartition(-values, n - 1)[:n]
        return idx[np.argsort(-values[idx], kind="stable")]


def softmax(logits: np.ndarray) -> np.ndarray:
    """float32 softmax of a vector that may hold -inf; computed in float64 for accuracy."""
    x = logits.astype(np.float64)
    x = np.exp(x - np.max(x))
    return (x / x.sum()).astype(np.float32)


def entropy_bits(probs: np.ndarray) -> float:
    p = probs[probs > 0].astype(np.float64)
    return float(-(p * np.log2(p)).sum())


def apply_repetition_penalty(logits: np.ndarray, context_ids: np.ndarray, penalty: float) -> np.ndarray:
    out = logits.copy()
    if penalty != 1 and len(context_ids):
        ids = np.unique(context_ids)
        values = out[ids]
        out[ids] = np.where(values > 0, values / penalty, values * penalty)
    return out


def apply_top_k(logits: np.ndarray, k: int) -> np.ndarray:
    if k <= 0 or k >= logits.shape[0]:
        return logits
    kth = np.partition(logits, -k)[-k]
    return np.where(logits < kth, NEG_INF, logits)  # ties with the k-th value are kept, as in HF


def apply_top_p(logits: np.ndarray, p: float) -> np.ndarray:
    if p >= 1:
        return logits
    probs = softmax(logits).astype(np.float64)
    order = np.argsort(-probs, kind="stable")
    cumulative = np.cumsum(probs[order])
    n_keep = int(np.searchsorted(cumulative, p - 1e-9, side="left")) + 1  # smallest set reaching p
    n_keep = max(1, min(n_keep, int(np.isfinite(logits).sum())))
    out = np.full_like(logits, NEG_INF)
    keep = order[:n_keep]
    out[keep] = logits[keep]
    return out


def distribution(logits: np.ndarray, context_ids: np.ndarray, settings: SamplingSettings) -> Distribution:
    """Run every sampling stage on raw ``logits`` [V] given the token ids already in the context."""
    logits = np.asarray(logits, dtype=np.float32)
    penalized = apply_repetition_penalty(logits, np.asarray(context_ids), settings.repetition_penalty)
    if settings.is_greedy:
        return Distribution(settings, penalized, penalized, penalized, penalized, softmax(penalized))
    scaled = (penalized / np.float32(settings.temperature)).astype(np.float32)
    top_k = apply_top_k(scaled, settings.top_k)
    top_p = apply_top_p(top_k, settings.top_p)
    return Distribution(settings, penalized, scaled, top_k, top_p, softmax(top_p))


def draw(dist: Distribution, step: int) -> int:
    """Choose the token: argmax when greedy, else an inverse-CDF draw.

    A seeded draw depends only on (seed, step), so a replayed or rewound session picks the same
    tokens, however often the step was re-sampled in between.
    """
    if dist.settings.is_greedy:
        return int(np.argmax(dist.after_penalty))
    seed = dist.settings.seed
    rng = np.random.default_rng(None if seed is None else [seed, step])
    cumulative = np.cumsum(dist.probs, dtype=np.float64)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    index = min(index, len(cumulative) - 1)
    while dist.probs[index] == 0:  # never land on a removed token through rounding
        index -= 1
    return index

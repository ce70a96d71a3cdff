"""Sampling: turn one step's raw logits into a distribution, stage by stage, and draw a token.

The stages run in the order Hugging Face ``generate`` uses: repetition penalty, temperature,
top-k, top-p, softmax. Each stage is kept so the window can show what it did. Everything is
numpy on one vector of ``V`` logits; no forward pass is needed to re-sample under new settings.

The draw is an inverse-CDF draw a person can follow: u in [0, 1) comes from the seeded generator
``np.random.default_rng([seed, step])`` (a fresh one when unseeded) and is used as it is; the
surviving tokens (final probability > 0) are laid end to end in the *draw order* (descending
probability, ties by lower token id) and their probabilities summed in float64; the chosen token is
the first whose cumulative probability exceeds u. Should rounding leave u at or beyond the last
cumulative value (the float32 probabilities may sum to a hair under 1), the last surviving token is
chosen. ``tests/engine/test_sampling.py`` checks every stage against Hugging Face's own processors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import SettingsError

NEG_INF = np.float32(-np.inf)


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen.

    greedy: always take the highest (penalised) logit; temperature 0 means the same.
    temperature: divide logits by it, in (0, 100]; 0 means greedy.
    top_k: keep the k highest logits, 0 means off; 50 by default, as in Hugging Face ``generate``
        (sampling from the whole vocabulary, a small model often draws tokens of almost no probability).
    top_p: keep the smallest set of tokens whose probability reaches p; 1 means off.
    Allowed values: ``RANGES``.
    repetition_penalty: in [1, 10]; for tokens already in the context positive logits are divided by
        it and negative ones multiplied (1 means off).
    seed: None for a fresh random draw every time, or an int in [0, 2**32) to replay exactly.
    """

    greedy: bool = False
    temperature: float = 1.0
    top_k: int = 50
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
RANGES = {  # the one rule for each setting's allowed values, both ends included: validate and the panel read it
    "temperature": (0.0, 100.0),  # and 0 < temperature < MIN_TEMPERATURE is refused
    "top_k": (0, 1_000_000),
    "top_p": (0.01, 1.0),  # 0 would keep no token; the panel shows two decimals
    "repetition_penalty": (1.0, 10.0),
    "seed": (0, 2**32 - 1),
}
_MEANING = {"temperature": "0 means greedy", "top_k": "0 means off", "top_p": "1 means off", "repetition_penalty": "1 means off"}


def _number(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def validate(s: SamplingSettings) -> None:
    """Raise SettingsError naming the allowed range (``RANGES``) of the first bad setting."""

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
    for name in ("top_k", "seed"):
        value = getattr(s, name)
        if name == "seed" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            bad(name, f"a whole number from {RANGES[name][0]} to {RANGES[name][1]:,}" + (", or empty for unseeded" if name == "seed" else ""))
    for name, (lo, hi) in RANGES.items():
        value = getattr(s, name)
        if value is None or lo <= value <= hi:
            continue
        if name == "seed":
            bad(name, f"a whole number from {lo} to {hi}, or empty for unseeded")
        bad(name, f"between {_number(lo)} and {_number(hi)} ({_MEANING[name]})")
    if 0 < s.temperature < MIN_TEMPERATURE:
        bad("temperature", f"between 0 and 100 (0 means greedy; the smallest other value is {MIN_TEMPERATURE:g})")


@dataclass(frozen=True)
class Distribution:
    """One step's logits after each sampling stage, each float32 [V]; removed tokens are -inf.

    after_penalty: raw logits with the repetition penalty applied.
    after_temperature: divided by the temperature (equal to after_penalty when greedy).
    after_top_k / after_top_p: with the tokens each filter removed set to -inf.
    probs: the final distribution the token is drawn from (softmax of after_top_p); when greedy,
        softmax of after_penalty, and the token is its argmax.
    in_context: int64 [C], the distinct token ids already in the context, ascending (the tokens the
        repetition penalty applies to when it is not 1).

    The methods answer what a stage-by-stage view needs (``stages``) and perform the draw
    (``draw_order``, ``pick``); none of them is cached, so the object stays as small on the wire
    as its arrays.
    """

    settings: SamplingSettings
    after_penalty: np.ndarray
    after_temperature: np.ndarray
    after_top_k: np.ndarray
    after_top_p: np.ndarray
    probs: np.ndarray
    in_context: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def kept(self) -> np.ndarray:
        """bool [V]: tokens that survive top-k and top-p."""
        return np.isfinite(self.after_top_p)

    def entropy_bits(self) -> float:
        return entropy_bits(self.probs)

    def top(self, n: int, by: np.ndarray | None = None) -> np.ndarray:
        """Indices of the n largest values of ``by`` (default: final probs), largest first, ties by lower id."""
        return top_ids(self.probs if by is None else by, n)

    # ------------------------------------------------------------ the draw
    def draw_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(token ids int64 [N], cumulative float64 [N]): the N tokens whose final probability is
        above 0 in the draw order (descending probability, ties by lower id) and the running
        float64 sum of their probabilities."""
        order = ranked(self.probs)
        return order, np.cumsum(self.probs[order], dtype=np.float64)

    def pick(self, u: float) -> int:
        """The token an inverse-CDF draw with ``u`` in [0, 1) selects: the first in the draw order
        whose cumulative probability exceeds u, or the last if rounding leaves u beyond them all."""
        order, cumulative = self.draw_order()
        return int(order[min(int(np.searchsorted(cumulative, u, side="right")), len(order) - 1)])

    # ------------------------------------------------- stage-by-stage view
    def penalised(self, ids: np.ndarray) -> np.ndarray:
        """bool [K]: whether the repetition penalty changed each of ``ids`` (in context, penalty != 1)."""
        if self.settings.repetition_penalty == 1:
            return np.zeros(len(ids), dtype=bool)
        return np.isin(ids, self.in_context)

    def removed_by(self, ids: np.ndarray) -> np.ndarray:
        """str [K]: "top-k" or "top-p" for each of ``ids`` a filter removed, "" for the survivors."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.full(len(ids), "", dtype="<U5")
        out[~np.isfinite(self.after_top_k[ids])] = "top-k"
        out[np.isfinite(self.after_top_k[ids]) & ~np.isfinite(self.after_top_p[ids])] = "top-p"
        return out

    def stages(self, ids: np.ndarray) -> "CandidateStages":
        """Every stage for the distinct tokens ``ids`` [K], plus the rest of the vocabulary summarised."""
        ids = np.asarray(ids, dtype=np.int64)
        same = self.settings.is_greedy or self.after_top_p is self.after_top_k  # no top-p: one softmax, one order
        before_top_p = self.probs if same else softmax(self.after_top_k)  # what top-p reads
        draw_rank, draw_start, draw_end = _positions(self.probs, ids)
        top_p_cumulative = draw_end if same else _positions(before_top_p, ids)[2]
        probs = self.probs[ids]
        removed = self.removed_by(ids)
        penalised = self.penalised(ids)
        finite_t = int(np.count_nonzero(np.isfinite(self.after_temperature)))
        finite_k = int(np.count_nonzero(np.isfinite(self.after_top_k)))
        finite_p = int(np.count_nonzero(np.isfinite(self.after_top_p)))
        total = float(self.probs.sum(dtype=np.float64))
        return CandidateStages(
            ids=ids,
            in_context=np.isin(ids, self.in_context),
            penalised=penalised,
            after_penalty=self.after_penalty[ids],
            after_temperature=self.after_temperature[ids],
            removed_by=removed,
            before_top_p=before_top_p[ids].astype(np.float64),
            top_p_cumulative=top_p_cumulative,
            probs=probs,
            draw_rank=draw_rank,
            draw_start=draw_start,
            draw_end=draw_end,
            rest_tokens=self.probs.shape[0] - len(ids),
            rest_penalised=(len(self.in_context) - int(penalised.sum())) if self.settings.repetition_penalty != 1 else 0,
            rest_removed_by_top_k=(finite_t - finite_k) - int((removed == "top-k").sum()),
            rest_removed_by_top_p=(finite_k - finite_p) - int((removed == "top-p").sum()),
            rest_before_top_p=float(before_top_p.sum(dtype=np.float64) - before_top_p[ids].sum(dtype=np.float64)),
            rest_prob=total - float(probs.sum(dtype=np.float64)),
        )


@dataclass(frozen=True)
class CandidateStages:
    """The sampling stages of K chosen tokens (usually the candidates shown), for a stage-by-stage view.

    ids: int64 [K], in the order given. in_context: bool [K]. penalised: bool [K], in context and the
        penalty is not 1 (after_penalty differs from the raw logit unless that was 0).
    after_penalty, after_temperature: float32 [K] (penalty and temperature remove nothing).
    removed_by: str [K], "top-k", "top-p" or "" (survived).
    before_top_p: float64 [K], softmax of after_top_k: the probabilities top-p reads (0 where top-k
        removed the token). top_p_cumulative: float64 [K], their running sum in descending order
        through each token (NaN where top-k removed it): the line top-p cuts at p.
    probs: float32 [K], the final (renormalised) probabilities.
    draw_rank: int64 [K], 0-based place in the draw order, -1 for a removed token (or one whose
        final probability rounds to 0).
    draw_start, draw_end: float64 [K], the token's segment of the cumulative bar [0, 1): the draw
        chooses it when draw_start <= u < draw_end (NaN for a removed token).
    rest_*: the V - K other tokens: how many, how many the penalty touched and each filter removed,
        their total probability before top-p and at the end, so that bars add up to 1.
    When greedy no filter runs: before_top_p equals probs (softmax at temperature 1).
    """

    ids: np.ndarray
    in_context: np.ndarray
    penalised: np.ndarray
    after_penalty: np.ndarray
    after_temperature: np.ndarray
    removed_by: np.ndarray
    before_top_p: np.ndarray
    top_p_cumulative: np.ndarray
    probs: np.ndarray
    draw_rank: np.ndarray
    draw_start: np.ndarray
    draw_end: np.ndarray
    rest_tokens: int
    rest_penalised: int
    rest_removed_by_top_k: int
    rest_removed_by_top_p: int
    rest_before_top_p: float
    rest_prob: float


def top_ids(values: np.ndarray, n: int) -> np.ndarray:
    """int64 [min(n, len)]: the indices of the ``n`` largest of ``values`` [V], largest first, ties
    by lower index: the one rule for every top-n list (candidates, logit lens, MLP units)."""
    values = np.asarray(values)
    n = min(int(n), values.shape[0])
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(values, values.shape[0] - n)[values.shape[0] - n]
    ids = np.flatnonzero(values >= kth)  # the top n and everything tied with the n-th, ascending
    return ids[np.lexsort((ids, -values[ids]))[:n]].astype(np.int64)


def ranked(values: np.ndarray) -> np.ndarray:
    """int64 [P]: the indices of the P positive float32 ``values``, largest value first, ties by
    lower index: the one order the engine uses for top-p and for the draw.

    A positive float32 orders like its bits, so this is a least-significant-digit radix sort of
    the inverted bits in two stable 16-bit passes over indices already ascending (numpy sorts
    16-bit keys by radix): about 1 ms at V = 50,257, a fifth of a comparison sort.
    """
    ids = np.flatnonzero(values > 0)
    bits = np.invert(np.asarray(values[ids], dtype=np.float32).view(np.uint32))
    order = np.argsort((bits & 0xFFFF).astype(np.uint16), kind="stable")
    order = order[np.argsort((bits[order] >> 16).astype(np.uint16), kind="stable")]
    return ids[order].astype(np.int64)


def _positions(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``ids``: (rank int64 [K], cumulative before, cumulative through float64 [K]) in the
    ``ranked`` order of ``values``, summed in float64 as the draw sums; -1 and NaN for ids whose
    value is 0."""
    order = ranked(values)
    sums = np.concatenate([[0.0], np.cumsum(values[order], dtype=np.float64)])  # sums[i]: total before order[i]
    where = np.full(values.shape[0], -1, dtype=np.int64)
    where[order] = np.arange(len(order))
    rank = where[ids]
    found = rank >= 0
    before = np.where(found, sums[np.maximum(rank, 0)], np.nan)
    through = np.where(found, sums[np.maximum(rank, 0) + 1], np.nan)
    return rank, before, through


def model_probs(logits: np.ndarray) -> np.ndarray:
    """float64 [V]: the *model probability* of every token, the softmax of the raw logits before any
    sampling setting (the one definition; the sampling probability is ``Distribution.probs``)."""
    x = logits.astype(np.float64)
    z = np.exp(x - x.max())
    return z / z.sum()


def model_logprob(logits: np.ndarray, token: int) -> float:
    """log of ``token``'s model probability, computed without underflow for very unlikely tokens."""
    x = logits.astype(np.float64)
    top = x.max()
    return float(x[token] - top - np.log(np.exp(x - top).sum()))


def softmax(logits: np.ndarray) -> np.ndarray:
    """float32 softmax of a vector that may hold -inf; computed in float64 for accuracy."""
    x = logits.astype(np.float64)
    x = np.exp(x - np.max(x))
    return (x / x.sum()).astype(np.float32)


def entropy_bits(probs: np.ndarray) -> float:
    """-Σ p log2 p over the tokens with p > 0, in bits: never below 0 (one certain token: 0.0, not -0.0)."""
    p = probs[probs > 0].astype(np.float64)
    return max(0.0, float(-(p * np.log2(p)).sum()))


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
    """Keep the smallest set of tokens, in ``ranked`` order, whose probability reaches p (tokens
    whose float32 probability is 0 are never kept, as in Hugging Face's TopPLogitsWarper)."""
    if p >= 1:
        return logits
    probs = softmax(logits)
    order = ranked(probs)
    cumulative = np.cumsum(probs[order], dtype=np.float64)
    n_keep = int(np.searchsorted(cumulative, p - 1e-9, side="left")) + 1  # smallest set reaching p
    out = np.full_like(logits, NEG_INF)
    keep = order[:n_keep]
    out[keep] = logits[keep]
    return out


def distribution(logits: np.ndarray, context_ids: np.ndarray, settings: SamplingSettings) -> Distribution:
    """Run every sampling stage on raw ``logits`` [V] given the token ids already in the context."""
    logits = np.asarray(logits, dtype=np.float32)
    in_context = np.unique(np.asarray(context_ids, dtype=np.int64))
    penalized = apply_repetition_penalty(logits, in_context, settings.repetition_penalty)
    if settings.is_greedy:
        return Distribution(settings, penalized, penalized, penalized, penalized, softmax(penalized), in_context)
    scaled = (penalized / np.float32(settings.temperature)).astype(np.float32)
    top_k = apply_top_k(scaled, settings.top_k)
    top_p = apply_top_p(top_k, settings.top_p)
    return Distribution(settings, penalized, scaled, top_k, top_p, softmax(top_p), in_context)


@dataclass(frozen=True)
class Draw:
    """The outcome of one draw: the token, and u (NaN when greedy: nothing random happened)."""

    token: int
    u: float


def random_u(settings: SamplingSettings, step: int) -> float:
    """The draw's u in [0, 1): depends only on (seed, step), so a replayed or rewound session
    draws the same u however often the step was re-sampled in between; unseeded: a fresh one."""
    seed = settings.seed
    return float(np.random.default_rng(None if seed is None else [seed, step]).random())


def draw(dist: Distribution, step: int) -> Draw:
    """Choose the token: the highest penalised logit when greedy (lowest id on a tie), else the
    inverse-CDF draw of ``Distribution.pick`` with u from ``random_u``."""
    if dist.settings.is_greedy:
        return Draw(int(np.argmax(dist.after_penalty)), float("nan"))
    u = random_u(dist.settings, step)
    return Draw(dist.pick(u), u)

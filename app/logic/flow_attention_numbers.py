"""The selected head's attention maths for the newest query, as the Flow's strip shows it.

Plain Python and numpy, no Qt. The numbers come from the Inside view's answer (``engine.inside_trace.
InsideTrace``, one recompute of the newest position with the model's own modules), never
recomputed here but for the dot products its scores are made of:

    q · k_j          the query (after RoPE where the model turns it) with each earlier key, as cached
    × scale          the model's factor on it (``InsideTrace.attn_scale``: 1/√d_head, or GraniteMoe's
                     attention_multiplier); that is the score softmax receives (``scores``)
    softmax          over the positions 0..p (the later ones are masked): the weight (``pattern``)
    |weight × v_j|   how much of position j's value the head takes into its output z (``z``)

Shown for the keys with the largest weights (ties: the lower position), the rest summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.architecture import INV_SQRT_D_HEAD

SHOWN = 5  # keys the strip lists, by weight


@dataclass(frozen=True)
class KeyRow:
    """One earlier position as the head sees it: ``dot`` = q · k, ``score`` = dot × scale (what
    softmax receives), ``weight`` its softmax weight, ``taken`` = |weight × v| = weight × |v|."""

    position: int
    piece: str
    dot: float
    score: float
    weight: float
    taken: float


@dataclass(frozen=True)
class HeadMaths:
    """Head ``head`` of block ``layer`` for the query at ``position`` (token ``piece``) of history
    step ``step``: its ``rows`` (the SHOWN largest weights, largest first), the ``rest`` positions'
    summed weight (``rest_weight``) and summed |weight × v| (``rest_taken``), of ``n_keys`` visible
    positions in all. ``scale``: the factor on q · k; ``scale_text`` writes it ("÷ √64", or "× 0.2"
    for GraniteMoe's attention_multiplier; ``rule`` names which); ``rotated``: q and k are turned by their positions before
    the product (RoPE); ``kv_head``: the key/value head the query head reads; ``z_norm``: |z|, the
    length of the head's output before the output projection (the weighted sum of every value)."""

    step: int
    layer: int
    head: int
    kv_head: int
    position: int
    piece: str
    n_keys: int
    scale: float
    scale_text: str
    rule: str
    rotated: bool
    rows: tuple[KeyRow, ...]
    rest: int
    rest_weight: float
    rest_taken: float
    z_norm: float


def scale_text(scale: float, d_head: int, rule: str | None) -> str:
    """The factor on q · k as the strip's column head writes it: "÷ √64" when it is 1/√d_head,
    else "× 0.2" (the config's attention_multiplier, say)."""
    if rule == INV_SQRT_D_HEAD or (rule is None and math.isclose(scale, d_head ** -0.5, rel_tol=1e-5)):
        return f"÷ √{d_head}"
    return f"× {scale:.3g}"


def head_maths(trace, layer: int, head: int, pieces, rule: str | None = None, shown: int = SHOWN) -> HeadMaths | None:
    """The maths of ``head`` in ``layer`` for ``trace``'s position (an ``InsideTrace`` whose
    ``kv_layers`` hold ``layer``; None otherwise). ``pieces``: the readable text of the context's
    tokens (index = position; a missing one is shown as its position alone); ``rule``: the model's
    ``Architecture.score_rule`` (None: not known)."""
    if layer not in trace.kv_layers or not 0 <= head < trace.n_head:
        return None
    kv = trace.kv_of(head)
    index = trace.kv_layers.index(layer)
    keys = np.asarray(trace.keys[index, kv], dtype=np.float64)  # [T, dh], as cached (after RoPE)
    values = np.asarray(trace.values[index, kv], dtype=np.float64)  # [T, dh]
    rotated = trace.rot_q is not None
    q = np.asarray((trace.rot_q if rotated else trace.q)[layer, head], dtype=np.float64)  # [dh]
    dots = keys @ q  # [T]
    scores = np.asarray(trace.scores[layer, head], dtype=np.float64)
    weights = np.asarray(trace.pattern[layer, head], dtype=np.float64)
    taken = weights * np.linalg.norm(values, axis=-1)
    n = len(weights)
    order = np.lexsort((np.arange(n), -weights))[:shown]  # largest weight first, ties: the lower position
    rest = np.setdiff1d(np.arange(n), order)
    scale = float(trace.attn_scale[layer])
    rows = tuple(KeyRow(int(j), pieces[j] if j < len(pieces) else "", float(dots[j]), float(scores[j]),
                        float(weights[j]), float(taken[j])) for j in order)
    return HeadMaths(
        step=int(trace.step), layer=int(layer), head=int(head), kv_head=int(kv), position=int(trace.position),
        piece=pieces[trace.position] if trace.position < len(pieces) else "", n_keys=n, scale=scale,
        scale_text=scale_text(scale, int(q.shape[0]), rule), rule=rule or "", rotated=rotated, rows=rows, rest=len(rest),
        rest_weight=float(weights[rest].sum()), rest_taken=float(taken[rest].sum()),
        z_norm=float(np.linalg.norm(np.asarray(trace.z[layer, head], dtype=np.float64))),
    )


def compact(x: float) -> str:
    """A number in at most six characters, digits never cut: 3 significant figures, or 1.2e+03."""
    text = f"{x:.3g}"
    return text if len(text) <= 6 else f"{x:.1e}"


def column(values) -> list[str]:
    """A column of numbers in one format, so that they line up: the same decimals for all, the
    largest with 3 significant figures (at most 3 decimals where it is 0.01 or more: 0.080, 0.067);
    each ``compact`` where the largest needs more than six characters."""
    top = max((abs(v) for v in values), default=0.0)
    if top >= 99_999.5:
        return [compact(v) for v in values]
    exponent = math.floor(math.log10(top)) if top > 0 else 0
    decimals = min(max(0, 2 - exponent), max(3, 1 - exponent))
    return [f"{v:.{decimals}f}" for v in values]


def percent(x: float) -> str:
    """A weight as the strip writes it: 62%, 3.1%, 0.04%."""
    if x >= 0.0995:
        return f"{x:.0%}"
    return f"{x:.1%}" if x >= 0.000995 else f"{x:.2%}" if x >= 0.00005 else "0%"


def table(m: HeadMaths, rows: int) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The strip's text: its column heads and up to ``rows`` rows (the keys by weight, then the
    rest summed when a row is left for it), each (key, q · k, × scale, weight, |weight × v|)."""
    head = ("key", "q·k", m.scale_text, "softmax", "|w·v|")
    shown = m.rows[:rows]
    rest = bool(m.rest) and len(shown) < rows  # every key listed had room: the others, summed
    dots, scores = column([r.dot for r in shown]), column([r.score for r in shown])
    taken = column([r.taken for r in shown] + ([m.rest_taken] if rest else []))
    body = [(f"{r.piece} {r.position}", dots[i], scores[i], percent(r.weight), taken[i]) for i, r in enumerate(shown)]
    if rest:
        body.append((f"{m.rest} more", "", "", percent(m.rest_weight), taken[-1]))
    return head, body

"""What the Why view draws, as plain data: the waterfall's bars, the largest pushes and pulls, and
the sentences that name them. Plain Python and numpy (tested without Qt); the numbers are the
engine's ``engine.attribution_trace.Attribution``, the words are written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from html import escape

import numpy as np

from engine.tokens import clip

from app.logic.wording import percent


@dataclass(frozen=True)
class Bar:
    """One bar of the waterfall: ``key`` (Attribution.parts' key), ``label`` (a person's words),
    ``short`` (an axis tick), ``start`` (the running sum before it) and ``value`` (its part)."""

    key: str
    label: str
    short: str
    start: float
    value: float

    @property
    def end(self) -> float:
        return self.start + self.value


def part_label(key: str) -> tuple[str, str]:
    """(label, tick) of an Attribution.parts key: "attn 3" -> ("block 3's attention", "A3")."""
    if key.startswith(("attn ", "mlp ")):
        kind, layer = key.split()
        return (f"block {layer}'s attention" if kind == "attn" else f"block {layer}'s MLP"), f"{'A' if kind == 'attn' else 'M'}{layer}"
    return {"embed": ("the token embedding", "emb"), "pos_embed": ("the position embedding", "pos"),
            "norm_shift": ("the final norm's shift", "shift"), "head_bias": ("the LM head's bias", "bias")}[key]


def waterfall(a) -> list[Bar]:
    """The bars from the embedding through every block to the logit, in the order the model adds them
    (``Attribution.parts``: a part the model does not have, RMSNorm's shift or a missing bias, is not one)."""
    bars, running = [], 0.0
    for key, value in a.parts():
        label, short = part_label(key)
        bars.append(Bar(key, label, short, running, float(value)))
        running += float(value)
    return bars


def largest(a, n: int = 3) -> tuple[list[Bar], list[Bar]]:
    """The ``n`` largest pushes (positive parts, largest first) and pulls (negative, most negative first)."""
    bars = waterfall(a)
    pushes = sorted((b for b in bars if b.value > 0), key=lambda b: -b.value)[:n]
    pulls = sorted((b for b in bars if b.value < 0), key=lambda b: b.value)[:n]
    return pushes, pulls


def top_heads(a, n: int = 3) -> list[tuple[int, int, float]]:
    """(layer, head, part) of the ``n`` heads with the largest |part|, largest first (ties: lower layer, head)."""
    flat = a.heads.ravel()
    order = sorted(range(flat.size), key=lambda i: (-abs(float(flat[i])), i))[:n]
    H = a.heads.shape[1]
    return [(i // H, i % H, float(flat[i])) for i in order]


def what(target_piece: str, versus_piece: str) -> str:
    """The quantity split: "the logit of ' Paris'" or "the logit of ' Paris' minus that of ' the'"."""
    text = f"the logit of “{clip(target_piece, 16)}”"
    return text + (f" minus that of “{clip(versus_piece, 16)}”" if versus_piece else "")


def summary(a, target_piece: str, versus_piece: str = "", n: int = 3) -> str:
    """One line or two: what is split, that the parts add up, the largest pushes, pulls and heads
    (A = attention, M = MLP, LxHy = layer x head y)."""
    pushes, pulls = largest(a, n)
    named = lambda bars: ", ".join(f"{b.short} {b.value:+.2f}" for b in bars) or "none"  # noqa: E731
    heads = ", ".join(f"L{layer}H{head} {value:+.2f}" for layer, head, value in top_heads(a, n))
    return (f"Why {what(target_piece, versus_piece)} is {a.logit:.2f} (position {a.position}, step {a.step}): "
            f"{len(waterfall(a))} parts add up to {a.total:.2f}. Pushes: {named(pushes)} · Pulls: {named(pulls)} · "
            f"Heads: {heads}")


def scale_sentence(a) -> str:
    """How the parts were read out, true for this model's final norm and logits."""
    norm = ("the final LayerNorm's scale at this position held fixed (each part's mean subtracted, as the norm does)"
            if a.norm_centres else "the final RMSNorm's scale at this position held fixed (RMSNorm subtracts no mean)")
    scaling = f", then divided by the model's logit scaling {a.logit_scale:g}" if a.logit_scale != 1.0 else ""
    return (f"Each part is a vector the residual stream received, read out through the final norm and the LM head "
            f"with {norm}{scaling}: norm scale {a.norm_scale:.3g}.")


def source_bars(a, layer: int, head: int) -> np.ndarray:
    """float32 [T]: head ``head`` of ``layer``'s part from each position it read (sums to its part)."""
    return a.sources[layer, head]


def amount(x: float) -> str:
    """A part of the logit as the sentences write it: "+1.25", or "about 0" where it rounds to zero
    ("+0.00" reads as a number worked out to be exactly zero)."""
    return f"{x:+.2f}" if abs(x) >= 0.005 else "about 0"


def head_sentence(a, layer: int, head: int, pieces) -> str:
    """What the selected head wrote and where from (its two largest sources by |part|), each token whole."""
    bars = source_bars(a, layer, head)
    order = sorted(range(len(bars)), key=lambda j: (-abs(float(bars[j])), j))[:2]
    where = ", ".join(f"“{pieces[j] if j < len(pieces) else ''}” ({j}: {amount(float(bars[j]))})" for j in order)
    kv = f" (key/value head {int(a.kv_head[head])})" if a.kv_head.max() + 1 < a.heads.shape[1] else ""
    return f"Head L{layer}H{head}{kv} writes {amount(float(a.heads[layer, head]))}, most from {where}"


# ------------------------------------------------------------------ the second page: a prompt pair
def pair_count(first_pieces, second_pieces, chosen: int = 0) -> str:
    """Whether a second prompt can be patched into the first: as many tokens in each, and where they differ."""
    n1, n2 = len(first_pieces), len(second_pieces)
    if n1 != n2:
        return (f"The second prompt has {n2:,} tokens and the first {n1:,}: patching needs as many tokens in each, "
                "so that a position is the same place in both.")
    differ = [i for i in range(n1) if first_pieces[i] != second_pieces[i]]
    where = ", ".join(f"{i} (“{clip(first_pieces[i], 12)}” → “{clip(second_pieces[i], 12)}”)" for i in differ[:3])
    more = f" and {len(differ) - 3:,} more" if len(differ) > 3 else ""
    then = f" Both are followed by the {chosen:,} tokens chosen so far." if chosen else ""
    if not differ:
        return f"{n1:,} tokens each, as many tokens as the first prompt, and the same tokens: change a word to compare.{then}"
    return (f"{n1:,} tokens each, as many tokens as the first prompt; they differ at position{'s' if len(differ) > 1 else ''} "
            f"{where}{more}.{then}")


SITE_WORDS = {  # engine.patching.SITES: (the choice's words, what a cell patches, TransformerLens's helper)
    "resid_pre": ("block input (resid_pre)", "block L's input", "get_act_patch_resid_pre"),
    "attn_out": ("attention output (attn_out)", "block L's attention output", "get_act_patch_attn_out"),
    "mlp_out": ("MLP output (mlp_out)", "block L's MLP output", "get_act_patch_mlp_out"),
}


def patch_caption(a) -> str:
    """What a cell of the patching map is (rich text), with this pair's numbers (``protocol.PatchResult``)."""
    quantity, place = what(a.target_piece, a.versus_piece), SITE_WORDS[a.site][1]
    L, P = a.restored.shape
    runs = f"{L:,} blocks × {P:,} positions patched in {a.patching.seconds:.1f} s."
    if not np.isfinite(a.restored).any():
        return (f"The two prompts give the same {quantity} ({a.first_metric:.2f}) at step {a.step}: there is no "
                f"difference to restore. {runs}")
    layer, position = np.unravel_index(int(np.nanargmax(a.restored)), a.restored.shape)  # the first of a tie
    return (f"<b>Each cell</b>: the share of the difference in {quantity} restored when {place} at position i "
            f"is taken from the first prompt (1: all of it, 0: none; step {a.step}: the first prompt gives "
            f"{a.first_metric:.2f}, the second {a.second_metric:.2f}). Most: block {layer} at position {position} "
            f"(“{clip(a.first_pieces[position], 12)}”), {float(a.restored[layer, position]):.2f}. {runs}")


def patch_formula(a) -> str:
    """The formula of a cell, for a tooltip."""
    _, _, helper = SITE_WORDS[a.site]
    return (f"share = (patched − second) / (first − second), each {what(a.target_piece, a.versus_piece)} at the last "
            f"position: the second prompt run with blocks.L.hook_{a.site} at position i taken from the first prompt's "
            f"run (TransformerLens's {helper}).")


def candidates_html(top) -> str:
    """A prompt's most likely next tokens, one a line: “piece” and its model probability."""
    return "<br>".join(f"“{escape(clip(piece, 14))}” {percent(prob)}" for _id, piece, prob in top)


# ------------------------------------------------------------------ a prompt pair stepped together
def pair_difference(first, second) -> tuple[np.ndarray, np.ndarray]:
    """(attention float32 [L], MLP float32 [L]): each block's part in the first prompt's run minus
    its part in the second's (two Attributions of the same target)."""
    return ((first.attn - second.attn).astype(np.float32), (first.mlp - second.mlp).astype(np.float32))


def largest_differences(first, second, n: int = 3) -> list[tuple[str, float]]:
    """(Attribution.parts key, first − second) of the ``n`` parts whose difference is largest in size,
    largest first (ties: the order the model adds them); the parts that are 0 by design are left out."""
    a, b = dict(first.parts()), dict(second.parts())
    order = [(key, float(a[key] - b[key])) for key, _ in first.parts() if key not in ("norm_shift", "head_bias")]
    return sorted(order, key=lambda kv: -abs(kv[1]))[:n]


def compare_caption(c, n: int = 3) -> str:
    """The pair's split (rich text, ``protocol.CompareResult``): both values, that the difference is the
    sum of the parts' differences, and the largest of them named."""
    quantity = what(c.target_piece, c.versus_piece)
    gap = c.first.logit - c.second.logit
    named = ", ".join(f"{part_label(key)[0]} {value:+.2f}" for key, value in largest_differences(c.first, c.second, n))
    return (f"<b>Bars: direct attribution, first − second</b> (step {c.step}): {quantity}, {c.first.logit:.2f} − "
            f"{c.second.logit:.2f} = {gap:+.2f}, the sum of the parts' differences. Largest: {named}.")


"""What the Why view draws: one logit split into what each part of the model writes straight into it.

Torch-free (numpy and the standard library only): this crosses from the engine to the window.
``engine.attribution.attribute`` fills it with one recompute of the position (as engine.inside does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Attribution:
    """The direct logit attribution of ``target`` (minus ``versus``'s logit, when one is given) at
    ``position`` of history step ``step``: L layers, H query heads, T = position + 1 visible positions.

    With the final norm's scale at ``position`` held fixed (``norm_scale``, TransformerLens's
    ``apply_ln_to_stack``), the logit is a sum of parts, each a vector the residual stream received,
    read out through the final norm and the LM head: part(c) = (c - mean(c) if ``norm_centres``
    else c) / norm_scale · (final norm weight ⊙ (W_U[:, target] - W_U[:, versus])) / ``logit_scale``.

    target, versus: token ids (versus -1: the target's logit alone).
    logit: what the model computed: logit[target] - logit[versus] (or logit[target]), float.
    embed: the token embedding's part (hook_embed: with GraniteMoe's embedding_multiplier).
    pos_embed: the position embedding's part (hook_pos_embed), 0 where the model has none
        (``has_pos_embed`` False: its positions are rotations of q and k).
    heads: float32 [L, H], each head's output z_h @ W_O[h] (times GraniteMoe's residual_multiplier)
        read out; attn_bias: float32 [L], each attention output bias b_O's part (0 without one:
        ``has_attn_bias``); heads[l].sum() + attn_bias[l] is block l's attention part.
    mlp: float32 [L], each block's MLP (a mixture of experts: its chosen experts together) part.
    norm_shift: the final norm's bias read out through the LM head (0 where it has none:
        ``has_norm_shift``, False for RMSNorm).
    head_bias: the LM head's bias at the target (minus at versus), divided by logit_scale (0 where
        the LM head has none: ``has_head_bias``).
    sources: float32 [L, H, T], each head's part split over the positions it read:
        pattern[l, h, j] x (value_j of the key/value head ``kv_head[h]``) @ W_O[h], read out; sums
        over T to ``heads``.
    kv_head: int64 [H], the key/value head each query head reads.
    norm_scale: the final norm's scale at ``position`` (ln_final.hook_scale); norm_centres: True
        for a LayerNorm (the mean is subtracted), False for RMSNorm.
    logit_scale: what the model divides its logits by (GraniteMoe's logits_scaling; 1 for the others).
    compute_ms: the recompute pass and the readout, milliseconds.
    """

    step: int
    position: int
    target: int
    versus: int
    logit: float
    embed: float
    pos_embed: float
    heads: np.ndarray
    attn_bias: np.ndarray
    mlp: np.ndarray
    norm_shift: float
    head_bias: float
    sources: np.ndarray
    kv_head: np.ndarray
    norm_scale: float
    norm_centres: bool
    logit_scale: float
    has_pos_embed: bool
    has_attn_bias: bool
    has_norm_shift: bool
    has_head_bias: bool
    compute_ms: float = 0.0

    @property
    def attn(self) -> np.ndarray:
        """float32 [L]: each block's attention part (its heads and its output bias)."""
        return (self.heads.sum(axis=1) + self.attn_bias).astype(np.float32)

    def parts(self) -> tuple[tuple[str, float], ...]:
        """Every part in the order the model adds them, (key, value): "embed", "pos_embed" (when the
        model has one), "attn {l}" and "mlp {l}" for each block, "norm_shift" and "head_bias" (where the
        model has them). They sum to ``logit`` up to float rounding."""
        out = [("embed", self.embed)] + ([("pos_embed", self.pos_embed)] if self.has_pos_embed else [])
        for layer in range(len(self.mlp)):
            out += [(f"attn {layer}", float(self.attn[layer])), (f"mlp {layer}", float(self.mlp[layer]))]
        out += [("norm_shift", self.norm_shift)] if self.has_norm_shift else []
        return tuple(out + ([("head_bias", self.head_bias)] if self.has_head_bias else []))

    @property
    def total(self) -> float:
        """The sum of every part (equals ``logit`` up to float rounding)."""
        return float(sum(value for _, value in self.parts()))

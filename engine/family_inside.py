"""What the Llama design and its mixture-of-experts variant add to one position's path: the data
for views of RoPE, RMSNorm, grouped key/value heads and expert routing (engine only; no view yet).

One hooked pass recomputes the position against a copy of the session's KV cache (as engine.inside
does for GPT-2), keeping the TransformerLens points of engine.families at that position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import families, hf_compat, hooks
from .errors import SessionError


@dataclass(frozen=True)
class FamilyInside:
    """One position's RoPE, RMSNorm, grouped-head and routing values, every layer (L layers, H query
    heads, KV key/value heads, dh = d_head, E experts, k experts per token).

    position: the position p.
    q, rot_q: float32 [L, H, dh], the query just before RoPE (after Qwen3's q_norm) and after it.
    k, rot_k: float32 [L, KV, dh], the same for the key this position adds to the cache.
    inv_freq: float32 [dh / 2], the rotation speed of each pair of dimensions (i, i + dh / 2), in
        radians per position; angles = p x inv_freq is how far this position turns each pair.
        A query at p and a key at j meet at angle (p - j) x inv_freq: the score depends on the
        distance between them, not on where they are.
    kv_head: int64 [H], the key/value head each query head reads (query heads share them in runs).
    ln1_scale, ln2_scale: float32 [L], sqrt(mean(x²) + eps) of each RMSNorm's input (no mean subtracted).
    router_probs: float32 [L, E], softmax of the router's logits over every expert (None: dense);
    experts: int64 [L, k], the chosen experts; expert_weights: float32 [L, k], the weights their
        outputs are summed with (Mixtral: the chosen share of router_probs, renormalised;
        GraniteMoe: a softmax over the chosen logits alone, which gives the same numbers).
    active_params, total_params: parameters this token ran through, and the model's total.
    """

    position: int
    q: np.ndarray
    rot_q: np.ndarray
    k: np.ndarray
    rot_k: np.ndarray
    inv_freq: np.ndarray
    kv_head: np.ndarray
    ln1_scale: np.ndarray
    ln2_scale: np.ndarray
    router_probs: np.ndarray | None
    experts: np.ndarray | None
    expert_weights: np.ndarray | None
    active_params: int
    total_params: int

    @property
    def angles(self) -> np.ndarray:
        """float32 [dh / 2]: radians each pair of dimensions is turned at this position."""
        return (self.position * self.inv_freq).astype(np.float32)


_POINTS = ("blocks.{L}.attn.hook_rot_q", "blocks.{L}.attn.hook_rot_k",
           "blocks.{L}.attn.hook_q", "blocks.{L}.attn.hook_k", "blocks.{L}.ln1.hook_scale", "blocks.{L}.ln2.hook_scale")
_MOE_POINTS = ("blocks.{L}.mlp.hook_router_probs", "blocks.{L}.mlp.hook_expert_indices", "blocks.{L}.mlp.hook_topk_weights")


def family_inside(session, step: int | None = None) -> FamilyInside:
    """The newest position of ``step`` (default: the latest) of a RoPE model's session."""
    model = session.require_model("recompute the path")
    family = families.family_of(model)
    if not family.rope:
        raise SessionError(f"{session.info.name} is a {family.name} model: it has no rotary positions or experts to show.")
    records = session.records
    if not records:
        raise SessionError("No step has run yet.")
    record = records[-1 if step is None else step]
    p = record.end - 1
    ids = session.token_ids()[: record.end]
    L, info = session.info.n_layer, session.info
    names = _POINTS + (_MOE_POINTS if family.moe else ())
    last = hooks.Keep(rows=slice(-1, None))
    past = session.kv_prefix(p)
    if past is None and p > 0:
        with torch.inference_mode():
            _, past = hf_compat.forward(model, torch.from_numpy(ids[:p])[None], None)
    with torch.inference_mode(), hooks.capture(model, L, {name: last for name in names}) as rec:
        hf_compat.forward(model, torch.from_numpy(ids[p:])[None], past)

    def stack(name: str, at=(0, -1)) -> np.ndarray:  # [L, ...] at position p (a router's [tokens, ...] hook: at=-1)
        return torch.stack([rec[name.format(L=i)][at] for i in range(L)]).float().cpu().numpy()

    q, k = [], []
    with torch.inference_mode():
        for i in range(L):  # the values RoPE receives: after Qwen3's per-head norm, if any
            attn = hf_compat.attention_module(model, i)
            qi, ki = hf_compat.pre_rope(attn, rec[f"blocks.{i}.attn.hook_q"][0, -1], rec[f"blocks.{i}.attn.hook_k"][0, -1])
            q.append(qi.float().cpu().numpy())
            k.append(ki.float().cpu().numpy())
    total, active = families.parameter_counts(model)
    group = info.n_head // info.kv_heads
    return FamilyInside(
        position=p,
        q=np.stack(q), rot_q=stack("blocks.{L}.attn.hook_rot_q"),
        k=np.stack(k), rot_k=stack("blocks.{L}.attn.hook_rot_k"),
        inv_freq=hf_compat.rope_inv_freq(model).float().cpu().numpy(),
        kv_head=np.arange(info.n_head, dtype=np.int64) // group,
        ln1_scale=stack("blocks.{L}.ln1.hook_scale")[:, 0], ln2_scale=stack("blocks.{L}.ln2.hook_scale")[:, 0],
        router_probs=stack("blocks.{L}.mlp.hook_router_probs", -1) if family.moe else None,
        experts=stack("blocks.{L}.mlp.hook_expert_indices", -1).astype(np.int64) if family.moe else None,
        expert_weights=stack("blocks.{L}.mlp.hook_topk_weights", -1) if family.moe else None,
        active_params=active, total_params=total,
    )

"""Forward hooks named like TransformerLens, installed for one forward pass and always removed.

``engine.families`` holds one table per model family from Hugging Face module paths to hook names
(``HOOK_POINTS`` here is GPT-2's); ``capture`` picks the loaded model's. Every name means
what it means in TransformerLens 3.x/4.x (components/layer_norm.py, abstract_attention.py,
mlps/mlp.py, transformer_block.py): ``hook_normalized`` is ``(x - mean) / hook_scale``, before the
layer norm's weight and bias; ``hook_attn_scores`` is scaled and causally masked (-inf), before the
softmax. ``ln1.hook_out``, ``ln2.hook_out`` and ``ln_final.hook_out`` (the layer norm's output, after
its weight and bias) are TransformerLens 4.x's names (its TransformerBridge gives every component a
``hook_out``); HookedTransformer 3.x has no hook there.

Each hook keeps a detached reference to (a row selection of) the module's input or output; nothing
is copied unless a ``Keep`` asks for a dtype conversion.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping

import torch

from . import hf_compat
from .families import GPT2_POINTS, HookPoint, family_of


# GPT-2's table; every family's table is in engine.families (one table per family).
HOOK_POINTS = GPT2_POINTS


@dataclass(frozen=True)
class Keep:
    """What ``capture`` keeps of one hook point.

    rows: the positions kept (query positions for hook_pattern and hook_attn_scores), as a slice
        or an int64 tensor of indices; None keeps every position.
    dtype: convert as the module finishes (float16 keeps the history small and frees the float32
        tensor at once instead of when the pass ends).
    softmax: take the softmax over the last axis first, in float32 (hook_pattern's value from kept
        rows of hook_attn_scores, where SDPA returns no weights).
    out: copy the value (batch 1) into this tensor, a part of a record made beforehand, and keep that:
        the module's own output is then not kept alive until the pass ends.
    """

    rows: slice | torch.Tensor | None = None
    dtype: torch.dtype | None = None
    softmax: bool = False
    out: torch.Tensor | None = None


ALL = Keep()


_TABLES: dict[tuple[int, int], tuple[Mapping[str, HookPoint], Mapping[str, HookPoint]]] = {}


def hook_table(n_layers: int, points: Mapping[str, HookPoint] = HOOK_POINTS) -> Mapping[str, HookPoint]:
    """``points`` (a family's table) with ``{L}`` expanded for every layer: hook name -> point with its
    module path. Built once per table and depth (rebuilding it took 2.8 ms of every step at SmolLM2's 30
    layers), read-only."""
    key = (n_layers, id(points))
    cached = _TABLES.get(key)
    if cached is None or cached[0] is not points:
        table = {}
        for name, point in points.items():
            layers = range(n_layers) if "{L}" in name else [None]
            for layer in layers:
                table[name.format(L=layer)] = replace(point, module=point.module.format(L=layer))
        cached = _TABLES[key] = (points, MappingProxyType(table))
    return cached[1]


def _expand(keep: Mapping[str, Keep] | Iterable[str], n_layers: int) -> dict[str, Keep]:
    items = keep.items() if isinstance(keep, Mapping) else ((name, ALL) for name in keep)
    out = {}
    for name, k in items:
        for layer in range(n_layers) if "{L}" in name else [None]:
            out[name.format(L=layer)] = k
    return out


def _take(args, kwargs, output, take: str):
    if take == "input":
        return args[0] if args else kwargs["hidden_states"]
    if take == "call":  # the attention module's input and (cos, sin): what its RoPE function reads
        return (args[0] if args else kwargs["hidden_states"]).detach(), kwargs["position_embeddings"]
    if take == "outputs":  # a router's (logits, top-k weights, top-k indices)
        return tuple(o.detach() for o in output)
    if take == "output":
        output = output[0] if isinstance(output, tuple) else output
    else:  # "output[i]"
        output = output[int(take[len("output["):-1])]
    return output.detach()


def _rows(t: torch.Tensor, rows, dim: int) -> torch.Tensor:
    if rows is None:
        return t
    if isinstance(rows, slice):
        return t[(slice(None),) * dim + (rows,)]
    return t.index_select(dim, rows.to(t.device))


def _masked_scores(q: torch.Tensor, k: torch.Tensor, rows, scaling: float) -> torch.Tensor:
    """[batch, head, query_pos, key_pos] like TransformerLens: q · k x scaling, masked with -inf above
    the diagonal. q [batch, head, pos, d_head]; k [batch, kv_head, pos, d_head] (each key head serves
    head / kv_head query heads in a row, as transformers' repeat_kv and TransformerLens's
    repeat_interleave do)."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    n = q.shape[2]
    query_pos = _rows(torch.arange(n, device=q.device), rows, 0)
    scores = torch.matmul(_rows(q, rows, 2), k.transpose(-1, -2)) * scaling
    future = torch.arange(n, device=q.device)[None, :] > query_pos[:, None]  # [query, key]
    return scores.masked_fill(future, float("-inf"))


def _view(t, view: str, rows, module) -> torch.Tensor:
    """The TransformerLens value of ``t`` (the taken tensor, every position), rows kept."""
    if view == "":
        return _rows(t, rows, 2 if t.ndim == 4 else 1)  # 4-D: attention weights [batch, head, query, key]
    if view in ("scale", "normalized"):
        x = _rows(t, rows, 1)
        x = x - x.mean(-1, keepdim=True)
        scale = (x.pow(2).mean(-1, keepdim=True) + module.eps).sqrt()  # [batch, pos, 1]
        return scale if view == "scale" else x / scale
    if view in ("rms_scale", "rms_normalized"):  # RMSNorm: no mean subtracted
        x = _rows(t, rows, 1)
        scale = (x.float().pow(2).mean(-1, keepdim=True) + module.variance_epsilon).sqrt()  # [batch, pos, 1]
        return scale if view == "rms_scale" else x / scale
    if view in ("tokens", "softmax"):  # a router's [batch x pos, ...] output (batch is 1: rows are positions)
        x = _rows(t, rows, 0)
        return x if view == "tokens" else torch.softmax(x.float(), dim=-1)
    if view == "expert_weights":  # TransformerLens 4.x: the top-k weights scattered into [tokens, n_experts]
        logits, weights, index = (_rows(x, rows, 0) for x in t)
        return torch.zeros_like(logits, dtype=weights.dtype).scatter(-1, index, weights)
    if isinstance(t, tuple):  # "call": the Llama design's attention call (rot_q, rot_k, scores)
        q, k = hf_compat.rotated_qk(module, *t)  # [batch, head, pos, d_head], [batch, kv_head, pos, d_head]
        if view == "scores":
            return _masked_scores(q, k, rows, module.scaling)
        return _rows((q if view == "rot_q" else k).transpose(1, 2), rows, 1)  # [batch, pos, head, d_head]
    d_head = module.head_dim if hasattr(module, "head_dim") else None
    if view == "heads":  # a projection's output (or c_proj's / o_proj's input) split per head
        x = _rows(t, rows, 1)
        return x.reshape(*x.shape[:-1], -1, d_head)
    q, k, v = t.split(t.shape[-1] // 3, dim=-1)  # GPT-2's c_attn output: [batch, pos, 3 d_model]
    if view in ("q", "k", "v"):
        x = _rows({"q": q, "k": k, "v": v}[view], rows, 1)
        return x.reshape(*x.shape[:-1], -1, d_head)
    # "scores": [batch, head, query_pos, key_pos], like TransformerLens: scaled, masked with -inf
    q = q.reshape(*q.shape[:-1], -1, d_head).transpose(1, 2)  # [batch, head, pos, d_head]
    k = k.reshape(*k.shape[:-1], -1, d_head).transpose(1, 2)
    return _masked_scores(q, k, rows, module.scaling)


# Views that need the attention module (its head_dim and scaling) rather than the hooked projection.
_OWNER = {"q", "k", "v", "heads"} | {"scores"}


@contextmanager
def capture(
    model,
    n_layers: int,
    keep: Mapping[str, Keep] | Iterable[str] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Record hook points of ``model`` during the ``with`` body into the yielded dict.

    ``keep`` names the points (templates with ``{L}`` or expanded names) and what to keep of each;
    default: the residual stream, embeddings, attention patterns and ``ln_final.hook_out``, every
    position. A Keep's dtype (e.g. float16 for attention patterns) converts each value as its layer
    finishes, so the float32 one is freed at once instead of all L of them living until the pass
    ends (at a 1,024-token prefill of GPT-2 small that is 600 MB, and fresh pages for each layer).
    """
    points = family_of(model).points
    if keep is None:
        keep = [name for name in ("hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre", "blocks.{L}.attn.hook_pattern",
                                  "blocks.{L}.hook_resid_post", "ln_final.hook_out") if name in points]
    wanted = _expand(keep, n_layers)
    table = hook_table(n_layers, points)
    by_module: dict[str, list[tuple[str, HookPoint, Keep]]] = {}
    for name, k in wanted.items():
        point = table[name]  # KeyError names an unknown hook
        by_module.setdefault(point.module, []).append((name, point, k))
    records: dict[str, torch.Tensor] = {}
    handles = []
    try:
        for path, entries in by_module.items():
            module = model.get_submodule(path)
            owner = module
            if any(p.view in _OWNER and p.take != "call" for _, p, _ in entries):
                owner = model.get_submodule(path.rsplit(".", 1)[0])  # transformer.h.{L}.attn, model.layers.{L}.self_attn

            def hook(_module, args, kwargs, output, entries=entries, owner=owner):
                for name, point, k in entries:
                    value = _view(_take(args, kwargs, output, point.take), point.view, k.rows, owner)
                    if point.factor:  # GraniteMoe: what is added to the residual stream
                        value = value * getattr(model.config, point.factor)
                    if k.softmax:
                        value = torch.softmax(value.float(), dim=-1)
                    if k.out is not None:
                        value = k.out.copy_(value[0])
                    elif k.dtype is not None:
                        value = value.to(k.dtype)
                    elif k.rows is not None:
                        value = value.clone()  # a view of a few rows would keep the whole tensor alive
                    records[name] = value

            handles.append(module.register_forward_hook(hook, with_kwargs=True))
        yield records
    finally:
        for handle in handles:
            handle.remove()

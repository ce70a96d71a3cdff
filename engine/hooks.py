"""Forward hooks named like TransformerLens, installed for one forward pass and always removed.

``HOOK_POINTS`` is the single table from Hugging Face module paths to hook names. Every name means
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
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

import torch


@dataclass(frozen=True)
class HookPoint:
    """Where a TransformerLens value lives in a Hugging Face GPT-2.

    module: the module path (``{L}`` for the layer).
    take: which tensor of the call: "output", "output[0]", "output[1]" (attention weights, only
        returned by the eager implementation) or "input" (the first positional argument).
    view: how that tensor becomes the TransformerLens value: "" as it is; "q", "k", "v" one third
        of ``c_attn``'s output split per head; "heads" split per head; "scale", "normalized" the
        layer norm's statistics of its input; "scores" q · k x the attention scale, causally masked
        (needs every key in the same pass: only in a pass without a KV cache).
    """

    module: str
    take: str
    view: str = ""


_LN = "transformer.h.{L}.ln_1", "transformer.h.{L}.ln_2"
# TransformerLens name                       HF module, tensor, view                                   shape
HOOK_POINTS: dict[str, HookPoint] = {
    "hook_embed": HookPoint("transformer.wte", "output"),  # [batch, pos, d_model]
    "hook_pos_embed": HookPoint("transformer.wpe", "output"),  # [batch, pos, d_model] (or [1, pos, d_model])
    "blocks.{L}.hook_resid_pre": HookPoint("transformer.h.{L}", "input"),  # [batch, pos, d_model]
    "blocks.{L}.ln1.hook_scale": HookPoint(_LN[0], "input", "scale"),  # [batch, pos, 1]
    "blocks.{L}.ln1.hook_normalized": HookPoint(_LN[0], "input", "normalized"),  # [batch, pos, d_model]
    "blocks.{L}.ln1.hook_out": HookPoint(_LN[0], "output"),  # [batch, pos, d_model]
    "blocks.{L}.attn.hook_q": HookPoint("transformer.h.{L}.attn.c_attn", "output", "q"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_k": HookPoint("transformer.h.{L}.attn.c_attn", "output", "k"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_v": HookPoint("transformer.h.{L}.attn.c_attn", "output", "v"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_attn_scores": HookPoint("transformer.h.{L}.attn.c_attn", "output", "scores"),  # [batch, head, query_pos, key_pos]
    "blocks.{L}.attn.hook_pattern": HookPoint("transformer.h.{L}.attn", "output[1]"),  # [batch, head, query_pos, key_pos]
    "blocks.{L}.attn.hook_z": HookPoint("transformer.h.{L}.attn.c_proj", "input", "heads"),  # [batch, pos, head, d_head]
    "blocks.{L}.hook_attn_out": HookPoint("transformer.h.{L}.attn", "output[0]"),  # [batch, pos, d_model]
    "blocks.{L}.hook_resid_mid": HookPoint(_LN[1], "input"),  # [batch, pos, d_model]
    "blocks.{L}.ln2.hook_scale": HookPoint(_LN[1], "input", "scale"),  # [batch, pos, 1]
    "blocks.{L}.ln2.hook_normalized": HookPoint(_LN[1], "input", "normalized"),  # [batch, pos, d_model]
    "blocks.{L}.ln2.hook_out": HookPoint(_LN[1], "output"),  # [batch, pos, d_model]
    "blocks.{L}.mlp.hook_pre": HookPoint("transformer.h.{L}.mlp.c_fc", "output"),  # [batch, pos, d_mlp]
    "blocks.{L}.mlp.hook_post": HookPoint("transformer.h.{L}.mlp.act", "output"),  # [batch, pos, d_mlp]
    "blocks.{L}.hook_mlp_out": HookPoint("transformer.h.{L}.mlp", "output"),  # [batch, pos, d_model]
    "blocks.{L}.hook_resid_post": HookPoint("transformer.h.{L}", "output"),  # [batch, pos, d_model]
    "ln_final.hook_scale": HookPoint("transformer.ln_f", "input", "scale"),  # [batch, pos, 1]
    "ln_final.hook_normalized": HookPoint("transformer.ln_f", "input", "normalized"),  # [batch, pos, d_model]
    "ln_final.hook_out": HookPoint("transformer.ln_f", "output"),  # [batch, pos, d_model]
}


@dataclass(frozen=True)
class Keep:
    """What ``capture`` keeps of one hook point.

    rows: the positions kept (query positions for hook_pattern and hook_attn_scores), as a slice
        or an int64 tensor of indices; None keeps every position.
    dtype: convert as the module finishes (float16 keeps the history small and frees the float32
        tensor at once instead of when the pass ends).
    """

    rows: slice | torch.Tensor | None = None
    dtype: torch.dtype | None = None


ALL = Keep()


def hook_table(n_layers: int) -> dict[str, HookPoint]:
    """HOOK_POINTS with ``{L}`` expanded for every layer: hook name -> point with its module path."""
    table = {}
    for name, point in HOOK_POINTS.items():
        layers = range(n_layers) if "{L}" in name else [None]
        for layer in layers:
            table[name.format(L=layer)] = HookPoint(point.module.format(L=layer), point.take, point.view)
    return table


def _expand(keep: Mapping[str, Keep] | Iterable[str], n_layers: int) -> dict[str, Keep]:
    items = keep.items() if isinstance(keep, Mapping) else ((name, ALL) for name in keep)
    out = {}
    for name, k in items:
        for layer in range(n_layers) if "{L}" in name else [None]:
            out[name.format(L=layer)] = k
    return out


def _take(inputs, output, take: str) -> torch.Tensor:
    if take == "input":
        return inputs[0]
    if take == "output":
        return output[0] if isinstance(output, tuple) else output
    return output[0] if take == "output[0]" else output[1]


def _rows(t: torch.Tensor, rows, dim: int) -> torch.Tensor:
    if rows is None:
        return t
    if isinstance(rows, slice):
        return t[(slice(None),) * dim + (rows,)]
    return t.index_select(dim, rows)


def _view(t: torch.Tensor, view: str, rows, module) -> torch.Tensor:
    """The TransformerLens value of ``t`` (the taken tensor, every position), rows kept."""
    if view == "":
        return _rows(t, rows, 2 if t.ndim == 4 else 1)  # 4-D: attention weights [batch, head, query, key]
    if view in ("scale", "normalized"):
        x = _rows(t, rows, 1)
        x = x - x.mean(-1, keepdim=True)
        scale = (x.pow(2).mean(-1, keepdim=True) + module.eps).sqrt()  # [batch, pos, 1]
        return scale if view == "scale" else x / scale
    d_head = module.head_dim if hasattr(module, "head_dim") else None
    if view == "heads":  # c_proj's input: the heads' outputs side by side
        x = _rows(t, rows, 1)
        return x.reshape(*x.shape[:-1], -1, d_head)
    q, k, v = t.split(t.shape[-1] // 3, dim=-1)  # c_attn's output: [batch, pos, 3 d_model]
    if view in ("q", "k", "v"):
        x = _rows({"q": q, "k": k, "v": v}[view], rows, 1)
        return x.reshape(*x.shape[:-1], -1, d_head)
    # "scores": [batch, head, query_pos, key_pos], like TransformerLens: scaled, masked with -inf
    q = q.reshape(*q.shape[:-1], -1, d_head).transpose(1, 2)  # [batch, head, pos, d_head]
    k = k.reshape(*k.shape[:-1], -1, d_head).transpose(1, 2)
    query_pos = torch.arange(t.shape[1])
    q, query_pos = _rows(q, rows, 2), _rows(query_pos, rows, 0)
    scores = torch.matmul(q, k.transpose(-1, -2)) * module.scaling
    future = torch.arange(t.shape[1])[None, :] > query_pos[:, None]  # [query, key]
    return scores.masked_fill(future, float("-inf"))


# A view that needs the attention module (its head_dim and scaling) rather than the hooked one.
_OWNER = {"q": "attn", "k": "attn", "v": "attn", "heads": "attn", "scores": "attn"}


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
    if keep is None:
        keep = ["hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre", "blocks.{L}.attn.hook_pattern",
                "blocks.{L}.hook_resid_post", "ln_final.hook_out"]
    wanted = _expand(keep, n_layers)
    table = hook_table(n_layers)
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
            if any(_OWNER.get(p.view) for _, p, _ in entries):
                owner = model.get_submodule(path.rsplit(".", 1)[0])  # transformer.h.{L}.attn

            def hook(_module, inputs, output, entries=entries, owner=owner):
                for name, point, k in entries:
                    value = _view(_take(inputs, output, point.take).detach(), point.view, k.rows, owner)
                    if k.dtype is not None:
                        value = value.to(k.dtype)
                    elif k.rows is not None:
                        value = value.clone()  # a view of a few rows would keep the whole tensor alive
                    records[name] = value

            handles.append(module.register_forward_hook(hook))
        yield records
    finally:
        for handle in handles:
            handle.remove()

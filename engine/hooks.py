"""Forward hooks named like TransformerLens, installed for one forward pass and always removed.

``HOOK_POINTS`` is the single table from Hugging Face module paths to hook names. Each hook keeps a
detached reference to the module's output; nothing is copied until the caller asks, except attention
patterns when ``capture`` is given a ``pattern_dtype``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

# hook name template -> (HF module path template, which output to keep)     shape kept
HOOK_POINTS: dict[str, tuple[str, str]] = {
    "hook_embed": ("transformer.wte", "tensor"),  # [batch, pos, d_model]
    "hook_pos_embed": ("transformer.wpe", "tensor"),  # [batch, pos, d_model] (or [1, pos, d_model])
    "blocks.0.hook_resid_pre": ("transformer.drop", "tensor"),  # [batch, pos, d_model]
    "blocks.{L}.attn.hook_pattern": ("transformer.h.{L}.attn", "second"),  # [batch, head, query_pos, key_pos]
    "blocks.{L}.hook_resid_post": ("transformer.h.{L}", "first"),  # [batch, pos, d_model]
    "ln_final.hook_normalized": ("transformer.ln_f", "tensor"),  # [batch, pos, d_model]
}


def hook_table(n_layers: int) -> dict[str, tuple[str, str]]:
    """HOOK_POINTS with ``{L}`` expanded for every layer: hook name -> (module path, output kind)."""
    table = {}
    for name, (path, kind) in HOOK_POINTS.items():
        layers = range(n_layers) if "{L}" in name else [None]
        for layer in layers:
            table[name.format(L=layer)] = (path.format(L=layer), kind)
    return table


def _pick(output, kind: str) -> torch.Tensor:
    if kind == "tensor":
        return output
    if kind == "first":
        return output[0] if isinstance(output, tuple) else output
    return output[1]  # "second": attention weights (only returned by the eager implementation)


@contextmanager
def capture(model, n_layers: int, pattern_dtype: torch.dtype | None = None) -> Iterator[dict[str, torch.Tensor]]:
    """Record every hook point of ``model`` during the ``with`` body into the yielded dict.

    ``pattern_dtype`` (e.g. float16) converts each attention pattern as its layer finishes, so the
    float32 pattern is freed at once instead of all L of them living until the pass ends (at a
    1,024-token prefill of GPT-2 small that is 600 MB, and fresh pages for each layer).
    """
    records: dict[str, torch.Tensor] = {}
    handles = []
    try:
        for name, (path, kind) in hook_table(n_layers).items():
            convert = pattern_dtype if kind == "second" else None

            def hook(_module, _inputs, output, name=name, kind=kind, convert=convert):
                kept = _pick(output, kind).detach()
                records[name] = kept if convert is None else kept.to(convert)

            handles.append(model.get_submodule(path).register_forward_hook(hook))
        yield records
    finally:
        for handle in handles:
            handle.remove()

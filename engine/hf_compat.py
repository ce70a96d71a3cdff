"""The one place that knows which transformers version is installed.

transformers 5.x renamed ``past_key_values`` to ``cache``, returns the cache as ``output.cache``,
and gave ``Cache.crop`` a "tokens to remove" meaning. Everything else in the engine calls these
helpers and never touches the cache object or those argument names directly.
Tested with the range pinned in pyproject.toml.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from functools import lru_cache

import torch


@lru_cache(maxsize=None)
def _cache_kwarg(model_cls: type) -> str:
    params = inspect.signature(model_cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def forward(model, input_ids: torch.Tensor, cache, *, keep_last_logits: bool = True):
    """Run ``input_ids`` [1, n] against ``cache`` (None for a prefill); return (logits [1, n', V], cache)."""
    kwargs = {_cache_kwarg(type(model)): cache, "use_cache": True}
    if keep_last_logits:
        kwargs["logits_to_keep"] = 1  # only the last position's logits: the LM head is the costliest matmul
    out = model(input_ids=input_ids, **kwargs)
    new_cache = getattr(out, "cache", None)
    if new_cache is None:
        new_cache = out.past_key_values
    return out.logits, new_cache


def cache_length(cache) -> int:
    """Number of positions held in the cache (0 for no cache)."""
    return 0 if cache is None else int(cache.get_seq_length())


def crop_cache(cache, length: int) -> None:
    """Cut every layer of the cache back to its first ``length`` positions, in place.

    Layers are cropped one by one, so a cache left uneven by a forward pass that failed half-way
    is repaired too.
    """
    if length < 0:
        raise ValueError(f"cannot crop a cache to {length} positions")
    if hasattr(cache, "layers"):
        for layer in cache.layers:
            held = int(layer.get_seq_length()) if layer.is_initialized else 0
            if held > length:
                layer.crop(length - held)  # negative: remove that many positions (5.x)
    else:  # pragma: no cover - transformers 4.x
        cache.crop(length - cache_length(cache))
    if cache_length(cache) > length:  # pragma: no cover - guards a future semantic change
        raise RuntimeError(f"cache crop left {cache_length(cache)} positions, expected {length}")


def layer_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each [batch, heads, positions, head_dim]."""
    if cache is None:
        return []
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(cache.key_cache[i], cache.value_cache[i]) for i in range(len(cache.key_cache))]  # 4.x


def copy_prefix(cache, length: int, config):
    """A new cache holding a copy of the first ``length`` positions of ``cache``, which stays untouched."""
    from transformers import DynamicCache

    new = DynamicCache(config=config)
    for layer, (keys, values) in enumerate(layer_tensors(cache)):
        new.update(keys[:, :, :length], values[:, :, :length], layer)  # update concatenates: a copy
    return new


@contextmanager
def attention(model, implementation: str):
    """Run ``model`` with another attention implementation inside the ``with`` ("sdpa": faster on CPU,
    returns no attention weights; "eager": returns them, which hook_pattern needs)."""
    before = model.config._attn_implementation
    model.set_attn_implementation(implementation)
    try:
        yield
    finally:
        model.set_attn_implementation(before)

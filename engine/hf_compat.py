"""The one place that knows which transformers version is installed.

transformers 5.x renamed ``past_key_values`` to ``cache``, returns the cache as ``output.cache``,
and gave ``Cache.crop`` a "tokens to remove" meaning. Everything else in the engine calls these
helpers and never touches the cache object or those argument names directly.
Tested with the range pinned in pyproject.toml.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def forward(model, input_ids: torch.Tensor, cache, *, use_cache: bool = True, keep_last_logits: bool = True):
    """Run ``input_ids`` [1, n] against ``cache`` (None for a prefill); return (logits [1, n', V], cache).

    ``use_cache=False`` runs without any cache, as a model without one must (``input_ids`` is then
    the whole sequence) and returns None for the cache.
    """
    out = model(input_ids=input_ids.to(model.device), **forward_kwargs(cache, use_cache=use_cache, keep_last_logits=keep_last_logits))
    return out.logits, output_cache(out, use_cache)


def forward_kwargs(cache, *, use_cache: bool = True, keep_last_logits: bool = True) -> dict:
    """The keyword arguments of ``forward``'s model call (nnsight's trace passes the same ones)."""
    kwargs = {"cache": cache if use_cache else None, "use_cache": use_cache}  # 5.x: ``past_key_values`` became ``cache``
    if keep_last_logits:
        kwargs["logits_to_keep"] = 1  # only the last position's logits: the LM head is the costliest matmul
    return kwargs


def output_cache(out, use_cache: bool):
    """The cache a forward pass returned (None without one)."""
    return out.cache if use_cache else None


def cache_length(cache) -> int:
    """Number of positions held in the cache (0 for no cache)."""
    return 0 if cache is None else int(cache.get_seq_length())


def crop_cache(cache, length: int) -> None:
    """Cut every layer of the cache back to its first ``length`` positions, in place (None: nothing to do).

    Layers are cropped one by one, so a cache left uneven by a forward pass that failed half-way
    is repaired too.
    """
    if length < 0:
        raise ValueError(f"cannot crop a cache to {length} positions")
    if cache is None:
        return
    for layer in cache.layers:
        held = int(layer.get_seq_length()) if layer.is_initialized else 0
        if held > length:
            layer.crop(length - held)  # negative: remove that many positions (5.x)
    if cache_length(cache) > length:  # pragma: no cover - guards a future semantic change
        raise RuntimeError(f"cache crop left {cache_length(cache)} positions, expected {length}")


def layer_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each [batch, heads, positions, head_dim]."""
    if cache is None:
        return []
    return [(layer.keys, layer.values) for layer in cache.layers]


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


def rotated_qk(attn, hidden_states: torch.Tensor, position_embeddings) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key of a Llama-design attention module after RoPE, recomputed from its call:
    ([batch, head, pos, d_head], [batch, kv_head, pos, d_head]).

    transformers applies RoPE with a function (``apply_rotary_pos_emb`` in the model's modeling
    module), not a module, so there is nothing to hook: this repeats the module's own steps (its
    projections, Qwen3's per-head q_norm / k_norm, then that same function on the same cos and sin).
    """
    import sys

    shape = (*hidden_states.shape[:-1], -1, attn.head_dim)
    q = attn.q_proj(hidden_states).view(shape)
    k = attn.k_proj(hidden_states).view(shape)
    if hasattr(attn, "q_norm"):  # Qwen3: an RMSNorm over each head's d_head values, before RoPE
        q, k = attn.q_norm(q), attn.k_norm(k)
    cos, sin = position_embeddings
    apply = sys.modules[type(attn).__module__].apply_rotary_pos_emb
    return apply(q.transpose(1, 2), k.transpose(1, 2), cos, sin)


def rotary_embeddings(model, positions: torch.Tensor):
    """(cos, sin), each [1, n, d_head], that the model's rotary embedding gives ``positions`` [n]."""
    inner = model.model
    return inner.rotary_emb(inner.embed_tokens.weight[:1], positions[None])


def attention_module(model, layer: int):
    """The Llama design's attention module of ``layer``."""
    return model.model.layers[layer].self_attn


def pre_rope(attn, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What RoPE receives from hook_q / hook_k ([..., heads, d_head]): Qwen3 first normalises each head."""
    if hasattr(attn, "q_norm"):
        return attn.q_norm(q), attn.k_norm(k)
    return q, k


def rope_inv_freq(model) -> torch.Tensor:
    """[d_head / 2] radians per position for each rotated pair of dimensions (the default RoPE type)."""
    return model.model.rotary_emb.inv_freq

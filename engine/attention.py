"""One head's whole attention pattern, recomputed on request from the recorded residual stream.

A long prefill keeps only a sample of its attention rows (``StepRecord.attn``): every layer's and
head's P x P pattern would grow with the square of the text (SmolLM2's 30 x 9 heads at 8,192
positions: 36 GB in float16). A view asks for the one head it draws; this recomputes it the way the
forward pass computed it. The pass's recorded ``resid[L]`` is block L's input at every position it
computed, so the block's own norm and projections (and RoPE, and Qwen3's per-head norms) give back
the same queries and keys, and q · k x the module's scale, masked and put through a softmax in
float32, the same pattern. Queries are taken in chunks, so at most [CHUNK, T] scores exist at a time.
"""

from __future__ import annotations

import numpy as np
import torch

from . import families, hf_compat
from .errors import SessionError

CHUNK = 512  # query rows per matmul: [CHUNK, T] float32 scores at a time (16 MB at 8,192 positions)


def head_map(session, step: int, layer: int, head: int) -> np.ndarray:
    """float16 [n, T]: blocks.{layer}.attn.hook_pattern[0, head] at every query position the pass of
    history step ``step`` computed (n of them, from its ``start``; T = its ``end`` keys), computed
    again from the residual stream the path's records hold (the keys of earlier positions come from
    the records before it)."""
    info = session.info
    if not (0 <= layer < info.n_layer and 0 <= head < info.n_head):
        raise SessionError(f"There is no layer {layer}, head {head} (layers 0 to {info.n_layer - 1}, heads 0 to {info.n_head - 1}).")
    records = session.records
    if not 0 <= step < len(records):
        raise SessionError(f"There is no step {step} (steps 0 to {len(records) - 1}).")
    model = session.require_model("compute an attention map")
    record = records[step]
    # block `layer`'s input at positions 0..end-1, from the records of the path (each covers start..end-1)
    x = torch.from_numpy(np.concatenate([r.resid[layer] for r in records[: step + 1]]))  # [T, d]
    with torch.inference_mode():
        q, k, scaling = _head_qk(model, layer, head, x)  # [T, dh] each
        out = np.empty((record.n_new, record.end), np.float16)
        keys = torch.arange(record.end)
        for lo in range(record.start, record.end, CHUNK):
            hi = min(lo + CHUNK, record.end)
            scores = torch.matmul(q[lo:hi], k.transpose(-1, -2)) * scaling  # [rows, T]
            scores = scores.masked_fill(keys[None, :] > torch.arange(lo, hi)[:, None], float("-inf"))
            out[lo - record.start : hi - record.start] = torch.softmax(scores.float(), dim=-1).half().numpy()
    return out


def _head_qk(model, layer: int, head: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(query, key, scale) of one query head at every position of block ``layer``'s input ``x`` [T, d]:
    the rotated ones for the Llama design; the key of the key/value head the query head reads."""
    if families.family_of(model).rope:
        block = model.model.layers[layer]
        attn = block.self_attn
        rope = hf_compat.rotary_embeddings(model, torch.arange(x.shape[0]))
        q, k = hf_compat.rotated_qk(attn, block.input_layernorm(x)[None], rope)  # [1, H, T, dh], [1, KV, T, dh]
    else:
        block = model.transformer.h[layer]
        attn = block.attn
        d = x.shape[-1]
        qkv = attn.c_attn(block.ln_1(x))  # [T, 3d]
        q, k = (t.reshape(1, x.shape[0], -1, attn.head_dim).transpose(1, 2) for t in (qkv[:, :d], qkv[:, d : 2 * d]))
    group = q.shape[1] // k.shape[1]  # query heads per key/value head, in runs (repeat_kv)
    return q[0, head], k[0, head // group], float(attn.scaling)

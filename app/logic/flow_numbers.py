"""The numbers the flow view draws and the tour reads out, taken from one SessionResult.

Plain numpy, no Qt: the flow panel paints them and ``app.logic.tour`` fills its sentences with them, so
both say the same thing. Every number comes from the step's own record (``engine.trace``): nothing
is recomputed by a model.

Probabilities are named as the help names them: *model probability* is the softmax of the raw
logits; *sampling probability* is the final distribution the draw used (after penalty,
temperature, top-k and top-p).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine import sampling
from engine.architecture import Architecture
from engine.sampling import SamplingSettings

from app.protocol.messages import SessionResult

N_TOP = 8  # candidates the logits box lists (as many as it has room for)


def _norm(x: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(x, dtype=np.float64)))


@dataclass(frozen=True)
class FlowNumbers:
    """One step's path, position by position of the newest query (the one that predicts the next
    token), layer by layer. Shapes: L layers, T positions in the context, d = d_model.

    input_ids, input_pieces: the tokens fed this step (all P at the prefill, one at a decode step);
    token_id, token_piece, position: the newest one of them and its position.
    embed_norm: |token embedding + position embedding| (embed_vector: float32 [d], that sum), token_norm and pos_norm: each alone.
    resid_norms: float [L + 1], |residual stream| before block 0 and after each block;
    mid_norms: float [L], after each block's attention was added (before its MLP);
    attn_norms, mlp_norms: float [L], |what each block's attention and MLP added|.
    layer, head: the selected block and head; attention: float [T], that head's weights for the
    newest position; head_top: float [H], each head's largest weight there (how sharply it looks); top_key: the position it weighs most (ties: the lower one), top_key_piece,
    top_weight.
    ln_in_norm, ln_out_norm: |x| into and out of the final norm (final_vector: float32 [d], its output);
    ln_normalized_norm: |x| after its normalising alone, before its learned scale (and shift): about
    sqrt(d) whatever ln_in_norm was (computed from the stream with the model's epsilon).
    top_ids, top_pieces, top_logits, top_model_probs, top_sampling_probs: the N_TOP candidates by
    penalised logit, best first.
    kept_after: (("vocabulary", V), ("penalty", ...), ("temperature", ...), ("top-k", ...),
    ("top-p", ...)): how many tokens can still be drawn after each stage; settings: the step's
    sampling settings (settings_text: in words).
    chosen_*: the token chosen; chosen_model_prob, chosen_sampling_prob; draw_u (NaN when greedy or
    chosen by a person), draw_start/draw_end: its stretch of [0, 1) in the draw order.
    kv_positions: int [L], positions cached per layer after this step; kv_added: rows each layer
    gained this step; kv_bytes.
    text_tail: the last characters of the context before the chosen token.
    arch: what the model is made of (engine.architecture.Architecture; None: not known), which
    every sentence about it is chosen by (app.logic.model_words); kv_heads: key/value heads (n_head with
    full heads); n_active_params of n_params run for each token (fewer with experts); experts:
    int64 [k], the experts the selected block's router chose for the newest position, highest
    weight first (None: no experts recorded). pos_norm is 0 where no position vector is added.
    """

    step: int
    n_layer: int
    n_head: int
    d_model: int
    vocab: int
    n_positions: int
    input_ids: tuple[int, ...]
    input_pieces: tuple[str, ...]
    token_id: int
    token_piece: str
    position: int
    context_len: int
    embed_norm: float
    embed_vector: np.ndarray
    token_norm: float
    pos_norm: float
    resid_norms: np.ndarray
    mid_norms: np.ndarray
    attn_norms: np.ndarray
    mlp_norms: np.ndarray
    layer: int
    head: int
    attention: np.ndarray
    head_top: np.ndarray
    top_key: int
    top_key_piece: str
    top_weight: float
    ln_in_norm: float
    ln_out_norm: float
    final_vector: np.ndarray
    top_ids: tuple[int, ...]
    top_pieces: tuple[str, ...]
    top_logits: tuple[float, ...]
    top_model_probs: tuple[float, ...]
    top_sampling_probs: tuple[float, ...]
    kept_after: tuple[tuple[str, int], ...]
    settings: SamplingSettings
    settings_text: str
    greedy: bool
    temperature: float
    chosen_id: int
    chosen_piece: str
    chosen_by: str
    chosen_rank: int
    chosen_logit: float
    chosen_model_prob: float
    chosen_sampling_prob: float
    entropy_bits: float
    draw_u: float
    draw_start: float
    draw_end: float
    kv_positions: np.ndarray
    kv_added: int
    kv_bytes: int
    kv_capacity: int
    text_tail: str
    ln_normalized_norm: float = float("nan")
    arch: Architecture | None = None
    kv_heads: int = 0
    n_params: int = 0
    n_active_params: int = 0
    experts: np.ndarray | None = None


def _normalized_norm(x: np.ndarray, arch: Architecture | None) -> float:
    """|x| after the final norm's normalising alone (LayerNorm: the mean subtracted, divided by the
    spread; RMSNorm: divided by the root mean square), before its learned scale: about sqrt(d)."""
    if arch is None:
        return float("nan")
    x = np.asarray(x, dtype=np.float64)
    if arch.norm == "LayerNorm":
        x = x - x.mean()
    return float(np.linalg.norm(x) / np.sqrt((x ** 2).mean() + arch.norm_eps))


def flow_numbers(result: SessionResult, layer: int = 0, head: int = 0, tail_chars: int = 60) -> FlowNumbers | None:
    """The flow's numbers for ``result``'s step at ``layer`` and ``head``; None before the prefill."""
    trace = result.trace
    if trace is None:
        return None
    rec, dist = trace.record, trace.distribution
    info = result.info
    layer = max(0, min(int(layer), result.n_layer - 1))
    head = max(0, min(int(head), result.n_head - 1))
    last = rec.n_new - 1
    resid = rec.resid[:, last, :]  # [L + 1, d]
    attn_out = rec.attn_out.astype(np.float32)
    mid = resid[:-1] + attn_out  # blocks.{L}.hook_resid_mid at the newest position
    attention = rec.attn[layer, head, -1, : rec.end].astype(np.float32)  # the newest row: every pass keeps it last
    top_key = int(np.argmax(attention))  # argmax: the first (lowest) position of a tie
    pieces = trace.pieces
    n_top = min(N_TOP, len(trace.candidate_ids))
    top_ids = np.asarray(trace.candidate_ids[:n_top], dtype=np.int64)
    model_probs = sampling.model_probs(rec.logits)
    kept = (
        ("vocabulary", int(rec.logits.shape[0])),
        ("penalty", int(np.count_nonzero(np.isfinite(dist.after_penalty)))),
        ("temperature", int(np.count_nonzero(np.isfinite(dist.after_temperature)))),
        ("top-k", int(np.count_nonzero(np.isfinite(dist.after_top_k)))),
        ("top-p", int(np.count_nonzero(dist.probs > 0))),
    )
    chosen = int(rec.chosen)
    order, cumulative = dist.draw_order()
    where = np.flatnonzero(order == chosen)
    if len(where):
        i = int(where[0])
        draw_start, draw_end = (float(cumulative[i - 1]) if i else 0.0), float(cumulative[i])
    else:  # a token the person chose that the filters had removed
        draw_start = draw_end = float("nan")
    kv = rec.kv
    context = "".join(pieces[: rec.end]).replace("␣", " ")
    return FlowNumbers(
        step=int(rec.step), n_layer=result.n_layer, n_head=result.n_head, d_model=int(info.d_model),
        vocab=int(info.vocab_size), n_positions=int(info.n_positions),
        input_ids=tuple(int(t) for t in rec.input_ids), input_pieces=tuple(pieces[rec.start : rec.end]),
        token_id=int(rec.input_ids[last]), token_piece=pieces[rec.end - 1], position=rec.end - 1,
        context_len=int(rec.end),
        embed_norm=_norm(rec.token_embed[last] + rec.pos_embed[last]), embed_vector=rec.token_embed[last] + rec.pos_embed[last],
        token_norm=_norm(rec.token_embed[last]), pos_norm=_norm(rec.pos_embed[last]),
        resid_norms=np.linalg.norm(resid.astype(np.float64), axis=1),
        mid_norms=np.linalg.norm(mid.astype(np.float64), axis=1),
        attn_norms=np.linalg.norm(attn_out.astype(np.float64), axis=1),
        mlp_norms=np.linalg.norm(rec.mlp_out.astype(np.float64), axis=1),
        layer=layer, head=head, attention=attention,
        head_top=rec.attn[layer, :, -1, : rec.end].astype(np.float32).max(axis=1), top_key=top_key, top_key_piece=pieces[top_key],
        top_weight=float(attention[top_key]),
        ln_in_norm=_norm(resid[-1]), ln_out_norm=_norm(rec.final_hidden), final_vector=rec.final_hidden,
        top_ids=tuple(int(t) for t in top_ids), top_pieces=tuple(trace.candidate_pieces[:n_top]),
        top_logits=tuple(float(rec.logits[t]) for t in top_ids),
        top_model_probs=tuple(float(model_probs[t]) for t in top_ids),
        top_sampling_probs=tuple(float(dist.probs[t]) for t in top_ids),
        kept_after=kept, settings=rec.settings, settings_text=rec.settings.describe(), greedy=rec.settings.is_greedy,
        temperature=float(rec.settings.temperature),
        chosen_id=chosen, chosen_piece=trace.chosen_piece, chosen_by=rec.chosen_by, chosen_rank=int(trace.chosen_rank),
        chosen_logit=float(rec.logits[chosen]), chosen_model_prob=float(model_probs[chosen]),
        chosen_sampling_prob=float(dist.probs[chosen]), entropy_bits=float(trace.entropy_bits),
        draw_u=float(rec.draw_u), draw_start=draw_start, draw_end=draw_end,
        kv_positions=np.asarray(kv.key_positions, dtype=np.int64), kv_added=rec.n_new if kv.positions else 0,
        kv_bytes=int(kv.total_bytes), kv_capacity=int(kv.capacity),
        text_tail=context[-tail_chars:],
        ln_normalized_norm=_normalized_norm(resid[-1], info.architecture),
        arch=info.architecture, kv_heads=int(info.kv_heads),
        n_params=int(info.n_params), n_active_params=int(info.n_active_params or info.n_params),
        experts=None if rec.experts is None else rec.experts[layer],
    )

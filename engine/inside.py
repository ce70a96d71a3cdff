"""Recompute the whole path from a token to the next token, for the Inside view and the export.

A step keeps only what is cheap (engine.session.STEP_HOOKS); everything else is recomputed here by
one hooked forward pass of the model (the TransformerLens points of ``hooks.HOOK_POINTS``): position
p alone against the keys and values of positions 0..p-1, copied from the session's KV cache when it
holds them, else computed by an unhooked pass over those positions. The model is causal, so a position's values do not depend on later
tokens: either way they equal, to float precision, what the step computed.
The logit lens (L + 1 products with the LM head) runs here, never inside a timed step.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np
import torch

from . import families, hf_compat, hooks
from .errors import SessionError
from .inside_trace import InsideTrace, ParamPart
from .sampling import top_ids

LENS_TOP = 10  # logit-lens candidates per depth

# Points recorded at the position asked for (the pass's last position), every layer. Keys and values
# of every position come from the pass's KV cache; the scores row from q and those keys.
_PATH = (
    "hook_embed", "hook_pos_embed", "blocks.{L}.hook_resid_pre",
    "blocks.{L}.ln1.hook_scale", "blocks.{L}.ln1.hook_normalized", "blocks.{L}.ln1.hook_out",
    "blocks.{L}.attn.hook_q", "blocks.{L}.attn.hook_pattern", "blocks.{L}.attn.hook_z",
    "blocks.{L}.hook_attn_out", "blocks.{L}.hook_resid_mid",
    "blocks.{L}.ln2.hook_scale", "blocks.{L}.ln2.hook_normalized", "blocks.{L}.ln2.hook_out",
    "blocks.{L}.mlp.hook_pre", "blocks.{L}.mlp.hook_post", "blocks.{L}.hook_mlp_out", "blocks.{L}.hook_resid_post",
    "ln_final.hook_scale", "ln_final.hook_normalized", "ln_final.hook_out",
)
# ... and for the Llama design and its MoE variant (those in the family's table).
_FAMILY_PATH = (
    "blocks.{L}.attn.hook_k", "blocks.{L}.attn.hook_rot_q", "blocks.{L}.attn.hook_rot_k", "blocks.{L}.mlp.hook_pre_linear",
    "blocks.{L}.mlp.hook_router_probs", "blocks.{L}.mlp.hook_expert_indices", "blocks.{L}.mlp.hook_topk_weights",
)

# How each mixture-of-experts family's router turns its logits into the chosen experts' weights
# (from its transformers modeling source).
ROUTER_RULES = {
    "Mixtral": "Mixtral's router takes the softmax over all {E} experts, keeps the {k} highest and "
               "divides them by their sum, so the chosen weights add up to 1.",
    "GraniteMoe": "GraniteMoe's router first keeps the {k} highest logits, then takes the softmax over those "
                  "{k} alone (the probabilities over all {E} experts shown here are never computed by it; "
                  "the chosen weights come out the same).",
}


_LLAMA_PARTS = {"input_layernorm": "RMSNorm 1", "self_attn": "attention", "post_attention_layernorm": "RMSNorm 2",
                "mlp": "MLP", "block_sparse_moe": "MLP"}


def param_parts(model) -> tuple[ParamPart, ...]:
    """Every parameter of a GPT2LMHeadModel (or a Llama-design model) by part (a tied LM head is the
    token embedding: listed once)."""
    if families.family_of(model).rope:
        return _llama_param_parts(model)
    parts = []
    for name, param in model.named_parameters():  # named_parameters lists a tied weight once
        bits = name.split(".")
        if bits[1] == "wte" or bits[0] == "lm_head":
            part = "token embedding" if bits[1] == "wte" else "LM head"
        elif bits[1] == "wpe":
            part = "position embedding"
        elif bits[1] == "ln_f":
            part = "final layer norm"
        else:
            sub = {"ln_1": "ln_1", "attn": "attention", "ln_2": "ln_2", "mlp": "MLP"}[bits[3]]
            part = f"block {bits[2]} {sub}"
        parts.append(ParamPart(part, name, tuple(param.shape)))
    return tuple(parts)


def _llama_param_parts(model) -> tuple[ParamPart, ...]:
    """model.embed_tokens, model.layers.{L}.(input_layernorm|self_attn|post_attention_layernorm|mlp|block_sparse_moe), model.norm, lm_head."""
    parts = []
    for name, param in model.named_parameters():
        bits = name.split(".")
        if bits[0] == "lm_head":
            part = "LM head"
        elif bits[1] == "embed_tokens":
            part = "token embedding"
        elif bits[1] == "norm":
            part = "final RMSNorm"
        else:
            part = f"block {bits[2]} {_LLAMA_PARTS[bits[3]]}"
        parts.append(ParamPart(part, name, tuple(param.shape)))
    return tuple(parts)


def lm_head_tied(model) -> bool:
    """True when the LM head's weight is the token embedding matrix (the same tensor)."""
    embed = model.get_input_embeddings().weight
    return model.lm_head.weight is embed or model.lm_head.weight.data_ptr() == embed.data_ptr()


def final_norm(model):
    """The norm before the LM head: GPT-2's ln_f, the Llama design's model.norm."""
    return model.transformer.ln_f if hasattr(model, "transformer") else model.model.norm


def top_by_id(logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` highest of each row of ``logits`` [N, V], best first, ties by lower id
    (``sampling.top_ids``): (ids int64 [N, k], values float32 [N, k])."""
    values = logits.float().cpu().numpy()
    ids = np.stack([top_ids(row, k) for row in values]) if len(values) else np.zeros((0, k), dtype=np.int64)
    return ids, np.take_along_axis(values, ids, axis=1).astype(np.float32)


@torch.inference_mode()
def logit_lens(model, resid: torch.Tensor, next_ids: np.ndarray, k: int = LENS_TOP, chunk: int = 64):
    """ln_f then the LM head on each residual vector of ``resid`` [N, d].

    Returns (ids int64 [N, k], logits float32 [N, k], next_prob float32 [N], next_rank int64 [N]) with
    ``next_ids`` int64 [N] the token whose probability (softmax of the raw logits) and rank are asked.
    Rows go ``chunk`` at a time: [N, V] float32 logits at once would be 2.6 GB for 13,000 rows.
    """
    out_ids, out_logits, probs, ranks = [], [], [], []
    next_t = torch.as_tensor(np.asarray(next_ids, dtype=np.int64), device=resid.device)
    for lo in range(0, resid.shape[0], chunk):
        logits = model.lm_head(final_norm(model)(resid[lo : lo + chunk])).float()  # [n, V]
        logits = logits / getattr(model.config, "logits_scaling", 1.0)  # GraniteMoe divides its logits
        ids, top = top_by_id(logits, k)
        nxt = next_t[lo : lo + chunk]
        picked = logits.gather(1, nxt[:, None])  # [n, 1]
        probs.append(torch.softmax(logits, dim=-1).gather(1, nxt[:, None])[:, 0].cpu().numpy())
        ranks.append(((logits > picked).sum(-1) + 1).cpu().numpy())
        out_ids.append(ids)
        out_logits.append(top)
    return (np.concatenate(out_ids), np.concatenate(out_logits), np.concatenate(probs).astype(np.float32),
            np.concatenate(ranks).astype(np.int64))


def resolve(session, step: int | None, position: int | None) -> tuple[int, int, np.ndarray, int]:
    """(step, position, context ids of that step, next id) for a request (default: the latest step,
    its newest position), or SessionError."""
    records = session.records
    if not records:
        raise SessionError("No step has run yet.")
    s = len(records) - 1 if step is None else step
    if not 0 <= s < len(records):
        raise SessionError(f"There is no step {step} (steps 0 to {len(records) - 1}).")
    record = records[s]
    p = record.end - 1 if position is None else position
    if not 0 <= p < record.end:
        raise SessionError(f"Step {s} sees positions 0 to {record.end - 1}, not {position}.")
    ids = session.token_ids()[: record.end]
    next_id = record.chosen if p == record.end - 1 else int(ids[p + 1])
    return s, p, ids, next_id


def recompute_position(session, ids: np.ndarray, p: int, names, *, use_cache: bool = True):
    """Position ``p`` of ``ids`` run as a decode step, hooked at ``names`` (point templates, kept at p
    alone), against the keys and values of positions 0..p-1: a copy of the session's KV cache when
    ``use_cache`` and it holds them, else computed first by an unhooked sdpa pass over 0..p-1.

    Returns (the recorded points, the logits at p float32 [V], the pass's cache holding 0..p)."""
    model = session.require_model("recompute the path")
    last = hooks.Keep(rows=slice(-1, None))  # position p is the pass's last position either way
    past = session.kv_prefix(p) if use_cache else None
    if past is None and p > 0:  # no cache to copy: compute positions 0..p-1's keys and values, unhooked
        with torch.inference_mode(), hf_compat.attention(model, "sdpa"):
            _, past = hf_compat.forward(model, torch.from_numpy(ids[:p])[None], None)
    with torch.inference_mode(), hooks.capture(model, session.info.n_layer, {name: last for name in names}) as rec:
        logits, cache = hf_compat.forward(model, torch.from_numpy(ids[p : p + 1])[None], past)
    return rec, logits[0, -1].float(), cache


def inside(session, step: int | None = None, position: int | None = None, *,
           kv_layers: tuple[int, ...] | None = None, use_cache: bool = True) -> InsideTrace:
    """Everything on the path at ``position`` (default: the step's newest) of ``step`` (default: latest).

    Position p runs as a decode step, hooked, against the keys and values of positions 0..p-1: a
    copy of the session's KV cache when ``use_cache`` and it holds them (tens of milliseconds), else
    computed first by an unhooked pass over positions 0..p-1 with sdpa attention (a prefill of p
    tokens). The two give the same values to float precision. ``kv_layers`` (default: all) are the layers whose
    keys and values of every visible position are included (float32 2 x H x T x dh each).
    """
    s, p, ids, next_id = resolve(session, step, position)
    model, info = session.require_model("recompute the path"), session.info
    family = families.family_of(model)
    names = [name for name in _PATH + _FAMILY_PATH if name in family.points]
    n_layers = info.n_layer
    layers_kv = tuple(range(n_layers)) if kv_layers is None else tuple(sorted(set(kv_layers)))
    t0 = perf_counter()
    rec, _, cache = recompute_position(session, ids, p, names, use_cache=use_cache)
    layer_kv = hf_compat.layer_tensors(cache)  # every layer's keys and values, positions 0..p
    keys = torch.stack([k[0] for k, _ in layer_kv])  # [L, KV, T, dh] (after RoPE for the Llama design)
    compute_ms = (perf_counter() - t0) * 1e3

    def per_layer(name: str) -> np.ndarray:  # [L, ...] at position p, float32
        return torch.stack([rec[name.format(L=i)][0, -1] for i in range(n_layers)]).float().cpu().numpy()

    def per_token(name: str) -> np.ndarray:  # a router's [tokens, ...] hook: [L, ...] at position p
        return torch.stack([rec[name.format(L=i)][-1] for i in range(n_layers)]).float().cpu().numpy()

    q = torch.stack([rec[f"blocks.{i}.attn.hook_q"][0, -1] for i in range(n_layers)])  # [L, H, dh]
    if family.rope:
        attns = [hf_compat.attention_module(model, i) for i in range(n_layers)]
        k_own = torch.stack([rec[f"blocks.{i}.attn.hook_k"][0, -1] for i in range(n_layers)])  # [L, KV, dh]
        with torch.inference_mode():  # what RoPE receives: after Qwen3's per-head norm
            q, k_own = (torch.stack(x) for x in zip(*(hf_compat.pre_rope(a, q[i], k_own[i]) for i, a in enumerate(attns))))
        rot_q = torch.stack([rec[f"blocks.{i}.attn.hook_rot_q"][0, -1] for i in range(n_layers)])  # [L, H, dh]
        scale = torch.tensor([a.scaling for a in attns], device=q.device)  # [L]
    else:
        k_own, rot_q = keys[:, :, -1], q
        scale = torch.tensor([block.attn.scaling for block in model.transformer.h], device=q.device)  # [L]
    group = q.shape[1] // keys.shape[1]  # query heads per key/value head
    scores = torch.einsum("lhd,lhtd->lht", rot_q, keys.repeat_interleave(group, dim=1)) * scale[:, None, None]  # [L, H, T]: row p of hook_attn_scores
    resid_pre, resid_post = per_layer("blocks.{L}.hook_resid_pre"), per_layer("blocks.{L}.hook_resid_post")
    t1 = perf_counter()
    resid = torch.from_numpy(np.concatenate([resid_pre[:1], resid_post])).to(model.device, model.dtype)
    lens_ids, lens_logits, next_prob, next_rank = logit_lens(model, resid, np.full(n_layers + 1, next_id))
    lens_ms = (perf_counter() - t1) * 1e3
    parts = param_parts(model)
    total, active = families.parameter_counts(model)
    d = resid_pre.shape[-1]
    has = lambda name: name in family.points  # noqa: E731
    no_mlp = np.zeros((n_layers, 0), dtype=np.float32)  # an MoE block has no single MLP
    extra = {}
    if family.rope:
        info_e = (model.config.num_local_experts, model.config.num_experts_per_tok) if family.moe else (0, 0)
        extra = dict(
            family=family.name, rope=True,
            kv_head=np.arange(q.shape[1], dtype=np.int64) // group,
            rot_q=rot_q.float().cpu().numpy(), rot_k=per_layer("blocks.{L}.attn.hook_rot_k"),
            inv_freq=hf_compat.rope_inv_freq(model).float().cpu().numpy(),
            mlp_pre_linear=per_layer("blocks.{L}.mlp.hook_pre_linear") if has("blocks.{L}.mlp.hook_pre_linear") else no_mlp,
            router_probs=per_token("blocks.{L}.mlp.hook_router_probs") if family.moe else None,
            experts=per_token("blocks.{L}.mlp.hook_expert_indices").astype(np.int64) if family.moe else None,
            expert_weights=per_token("blocks.{L}.mlp.hook_topk_weights") if family.moe else None,
            router_rule=ROUTER_RULES.get(family.name, "").format(E=info_e[0], k=info_e[1]),
            embed_multiplier=float(getattr(model.config, "embedding_multiplier", 1.0)),
            residual_multiplier=float(getattr(model.config, "residual_multiplier", 1.0)),
        )
    return InsideTrace(
        step=s,
        position=p,
        context_len=len(ids),
        token_id=int(ids[p]),
        next_id=int(next_id),
        token_embed=rec["hook_embed"][0, -1].float().cpu().numpy(),
        pos_embed=rec["hook_pos_embed"][0, -1].float().cpu().numpy() if has("hook_pos_embed") else np.zeros(d, dtype=np.float32),
        resid_pre=resid_pre,
        ln1_scale=per_layer("blocks.{L}.ln1.hook_scale")[:, 0],
        ln1_normalized=per_layer("blocks.{L}.ln1.hook_normalized"),
        ln1_out=per_layer("blocks.{L}.ln1.hook_out"),
        q=q.float().cpu().numpy(),
        k=k_own.float().cpu().numpy(),
        v=torch.stack([v[0, :, -1] for _, v in layer_kv]).float().cpu().numpy(),
        kv_layers=layers_kv,
        keys=torch.stack([layer_kv[i][0][0] for i in layers_kv]).float().cpu().numpy(),
        values=torch.stack([layer_kv[i][1][0] for i in layers_kv]).float().cpu().numpy(),
        scores=scores.float().cpu().numpy(),
        pattern=torch.stack([rec[f"blocks.{i}.attn.hook_pattern"][0, :, -1] for i in range(n_layers)]).float().cpu().numpy(),
        z=per_layer("blocks.{L}.attn.hook_z"),
        attn_out=per_layer("blocks.{L}.hook_attn_out"),
        resid_mid=per_layer("blocks.{L}.hook_resid_mid"),
        ln2_scale=per_layer("blocks.{L}.ln2.hook_scale")[:, 0],
        ln2_normalized=per_layer("blocks.{L}.ln2.hook_normalized"),
        ln2_out=per_layer("blocks.{L}.ln2.hook_out"),
        mlp_pre=per_layer("blocks.{L}.mlp.hook_pre") if has("blocks.{L}.mlp.hook_pre") else no_mlp,
        mlp_post=per_layer("blocks.{L}.mlp.hook_post") if has("blocks.{L}.mlp.hook_post") else no_mlp,
        mlp_out=per_layer("blocks.{L}.hook_mlp_out"),
        resid_post=resid_post,
        ln_final_scale=float(rec["ln_final.hook_scale"][0, -1, 0]),
        ln_final_normalized=rec["ln_final.hook_normalized"][0, -1].float().cpu().numpy(),
        final_hidden=rec["ln_final.hook_out"][0, -1].float().cpu().numpy(),
        lens_ids=lens_ids,
        lens_logits=lens_logits,
        lens_next_prob=next_prob,
        lens_next_rank=next_rank,
        lm_head_tied=lm_head_tied(model),
        attn_scale=scale.cpu().numpy().astype(np.float32),
        params=parts,
        n_params=sum(part.count for part in parts),
        compute_ms=compute_ms,
        lens_ms=lens_ms,
        active_params=active,
        **extra,
    )


# Points the export keeps at each step's newest position, every layer (a family's: an MoE block has no
# mlp.hook_pre / hook_post, so its file has no mlp_pre / mlp_post); for RoPE families q and k are the
# rotated ones, what the scores are made of.
_EXPORT = {
    "q": "blocks.{L}.attn.hook_q", "k": "blocks.{L}.attn.hook_k", "v": "blocks.{L}.attn.hook_v",
    "z": "blocks.{L}.attn.hook_z", "scores": "blocks.{L}.attn.hook_attn_scores",
    "attn_out": "blocks.{L}.hook_attn_out", "resid_mid": "blocks.{L}.hook_resid_mid",
    "mlp_pre": "blocks.{L}.mlp.hook_pre", "mlp_post": "blocks.{L}.mlp.hook_post", "mlp_out": "blocks.{L}.hook_mlp_out",
}
_ROTATED = {"q": "blocks.{L}.attn.hook_rot_q", "k": "blocks.{L}.attn.hook_rot_k"}


def export_points(family: families.Family) -> dict[str, str]:
    """The export's per-step key -> the family's TransformerLens point it holds."""
    points = _EXPORT | (_ROTATED if family.rope else {})
    return {key: name for key, name in points.items() if name in family.points}


def inside_arrays(session) -> dict[str, np.ndarray]:
    """The --export file's per-step path arrays (see engine.session_format), float32, from one recompute pass.

    For every step s at its newest position r = P - 1 + s: q_s, z_s [L, H, dh]; k_s, v_s [L, KV, dh];
    scores_s [L, H, r + 1]; attn_out_s, resid_mid_s, mlp_out_s [L, d]; mlp_pre_s, mlp_post_s [L, m]
    (not for a mixture of experts); lens_ids_s int64 / lens_logits_s [L + 1, 10]; and final_hidden
    [S, d] as each step recorded it.
    """
    records = session.records
    model, n_layers = session.require_model("recompute the path"), session.info.n_layer
    points = export_points(families.family_of(model))
    ids = session.token_ids()[: records[-1].end]
    rows = torch.tensor([r.end - 1 for r in records], dtype=torch.long, device=model.device)  # each step's newest position
    at_rows = hooks.Keep(rows=rows)
    keep = {name: at_rows for name in points.values()}
    keep |= {"blocks.0.hook_resid_pre": at_rows, "blocks.{L}.hook_resid_post": at_rows}
    with torch.inference_mode(), hooks.capture(model, n_layers, keep) as rec:
        hf_compat.forward(model, torch.from_numpy(ids)[None], None, use_cache=False)  # every position, no cache
        stacked = {key: torch.stack([rec[name.format(L=i)][0] for i in range(n_layers)])  # [L, S, ...]
                   for key, name in points.items() if key != "scores"}
        scores = torch.stack([rec[points["scores"].format(L=i)][0] for i in range(n_layers)])  # [L, H, S, T], masked
        out: dict[str, np.ndarray] = {}
        for s, r in enumerate(rows.tolist()):
            for key, value in stacked.items():
                out[f"{key}_{s}"] = value[:, s].float().cpu().numpy()
            out[f"scores_{s}"] = scores[:, :, s, : r + 1].float().cpu().numpy()  # the visible positions 0..r
        resid = torch.stack([rec["blocks.0.hook_resid_pre"][0]] + [rec[f"blocks.{i}.hook_resid_post"][0] for i in range(n_layers)])
        depth_rows = resid.transpose(0, 1).reshape(-1, resid.shape[-1])  # [S x (L + 1), d], step-major
        next_ids = np.repeat([r.chosen for r in records], n_layers + 1)
        lens_ids, lens_logits, _, _ = logit_lens(model, depth_rows, next_ids)
    for s in range(len(records)):
        out[f"lens_ids_{s}"] = lens_ids[s * (n_layers + 1) : (s + 1) * (n_layers + 1)]
        out[f"lens_logits_{s}"] = lens_logits[s * (n_layers + 1) : (s + 1) * (n_layers + 1)]
    out["final_hidden"] = np.stack([r.final_hidden for r in records]).astype(np.float32)
    return out

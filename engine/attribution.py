"""Direct logit attribution: one logit split exactly into what each part of the model writes into it.

The residual stream at the last layer is a sum of the vectors added to it: the token embedding (and
GPT-2's position embedding), then each block's attention output and MLP output. The final norm is
linear in that sum once its scale at the position is held fixed (TransformerLens's
``apply_ln_to_stack``: LayerNorm subtracts the mean, RMSNorm does not), and so is the LM head, so
the logit of a token is the sum of each vector read out through them, plus the final norm's shift
and any LM-head bias (every part divided by the model's logit scaling, GraniteMoe's
``logits_scaling``). An attention output splits further into its heads (z_h @ W_O[h]) and its bias
b_O, and a head's output over the positions it read (pattern x value @ W_O[h]).

This measures what each part writes straight into the logit, not what it causes through the later
layers that read it: patching measures that. Computed on request, by one recompute of the position
(``engine.inside.recompute_position``): nothing is recorded during a step.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np
import torch

from . import families, hf_compat, hooks
from .attribution_trace import Attribution
from .errors import SessionError
from .inside import final_norm, recompute_position, resolve

_POINTS = ("hook_embed", "hook_pos_embed", "blocks.{L}.attn.hook_z", "blocks.{L}.attn.hook_pattern",
           "blocks.{L}.hook_attn_out", "blocks.{L}.hook_mlp_out", "ln_final.hook_scale")


def _factor(model, family: families.Family, name: str) -> float:
    """The config factor the family's point ``name`` is multiplied by (GraniteMoe's multipliers; else 1)."""
    factor = family.points[name].factor
    return float(getattr(model.config, factor)) if factor else 1.0


def output_weights(model, family: families.Family, layer: int, n_heads: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(W_O float64 [H, dh, d], b_O float64 [d] or None) of ``layer``'s attention output projection:
    the module hook_z is the input of (GPT-2's Conv1D c_proj holds [in, out]; a Linear o_proj [out, in])."""
    proj = model.get_submodule(family.points["blocks.{L}.attn.hook_z"].module.format(L=layer))
    weight = proj.weight.T if isinstance(proj, torch.nn.Linear) else proj.weight  # [H x dh, d]
    bias = None if proj.bias is None else proj.bias.double()
    return weight.double().reshape(n_heads, -1, weight.shape[-1]), bias


def readout(model, target: int, versus: int = -1) -> tuple[torch.Tensor, float, float]:
    """(direction float64 [d], the final norm's shift read out, the LM head's bias) for the logit of
    ``target`` minus that of ``versus`` (-1: none), each divided by the logit scaling, before the
    final norm's scale: a part's share is its (centred) vector · direction / scale."""
    norm, head = final_norm(model), model.lm_head
    w_u = head.weight[target].double() - (head.weight[versus].double() if versus >= 0 else 0.0)  # [d]
    scaling = float(getattr(model.config, "logits_scaling", 1.0))
    direction = norm.weight.double() * w_u / scaling
    shift = float(norm.bias.double() @ w_u) / scaling if getattr(norm, "bias", None) is not None else 0.0
    bias = 0.0
    if head.bias is not None:
        bias = float(head.bias[target].double() - (head.bias[versus].double() if versus >= 0 else 0.0)) / scaling
    return direction, shift, bias


@torch.inference_mode()
def attribute(session, step: int | None = None, position: int | None = None, *,
              target: int | None = None, versus: int = -1, use_cache: bool = True) -> Attribution:
    """The parts of ``target``'s logit (default: the token that came next, the chosen one at a step's
    newest position), minus ``versus``'s when given, at ``position`` (default: the step's newest)
    of ``step`` (default: the latest). See ``Attribution``."""
    s, p, ids, next_id = resolve(session, step, position)
    model = session.require_model("split the logit")
    family = families.family_of(model)
    target = next_id if target is None else int(target)
    _check_ids(model, target, versus)
    t0 = perf_counter()
    names = [name for name in _POINTS if name in family.points]
    rec, logits, cache = recompute_position(session, ids, p, names, use_cache=use_cache)
    return _split(model, rec, logits, cache, s, p, target, versus, t0)


def _check_ids(model, target: int, versus: int) -> None:
    vocab = model.lm_head.weight.shape[0]
    if not 0 <= target < vocab or not -1 <= versus < vocab:
        raise SessionError(f"Token ids are 0 to {vocab - 1}: {target if not 0 <= target < vocab else versus} is not one.")
    if versus == target:
        raise SessionError("A token against itself: every part is 0.")


@torch.inference_mode()
def attribute_tokens(model, ids, target: int, versus: int = -1, step: int = -1) -> tuple[Attribution, np.ndarray]:
    """The parts of ``target``'s logit (minus ``versus``'s) at the last position of ``ids`` (int64 [n]),
    a text the session does not hold (a second prompt followed by the first's chosen tokens): its
    positions before the last run unhooked, the last as a decode step against their keys and values,
    as ``attribute`` does without a cache. Returns (the Attribution, marked ``step``; the logits at
    that position, float32 [V])."""
    ids = np.asarray(ids, dtype=np.int64)
    target, versus = int(target), int(versus)
    _check_ids(model, target, versus)
    family = families.family_of(model)
    t0 = perf_counter()
    p = len(ids) - 1
    past = None
    with hf_compat.attention(model, "sdpa"):
        if p > 0:
            _, past = hf_compat.forward(model, torch.from_numpy(ids[:p])[None], None)
    names = [name for name in _POINTS if name in family.points]
    last = hooks.Keep(rows=slice(-1, None))
    with hooks.capture(model, model.config.num_hidden_layers, {name: last for name in names}) as rec:
        out, cache = hf_compat.forward(model, torch.from_numpy(ids[p:])[None], past)
    logits = out[0, -1].float()
    return _split(model, rec, logits, cache, step, p, target, versus, t0), logits.numpy()


def _split(model, rec, logits: torch.Tensor, cache, s: int, p: int, target: int, versus: int, t0: float) -> Attribution:
    """The Attribution from one hooked pass at position ``p`` (``rec``: the points kept at p;
    ``cache``: keys and values of 0..p; ``logits`` [V] at p)."""
    family = families.family_of(model)
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    values = [v[0].double() for _, v in hf_compat.layer_tensors(cache)]  # per layer [KV, T, dh], positions 0..p

    def at_p(name: str) -> torch.Tensor:  # [d] (or [H, dh]) at position p, float64
        return rec[name][0, -1].double()

    centres = family.points["ln_final.hook_scale"].view == "scale"  # LayerNorm; RMSNorm's view is "rms_scale"
    scale = float(rec["ln_final.hook_scale"][0, -1, 0])
    direction, shift, head_bias = readout(model, target, versus)
    direction = direction / scale
    if centres:  # (c - mean(c)) · u == c · (u - mean(u))
        direction = direction - direction.mean()

    def part(vector: torch.Tensor) -> float:
        return float(vector @ direction)

    residual = _factor(model, family, "blocks.{L}.hook_attn_out")
    heads = np.zeros((n_layers, n_heads), np.float64)
    attn_bias = np.zeros(n_layers, np.float64)
    mlp = np.zeros(n_layers, np.float64)
    sources = np.zeros((n_layers, n_heads, p + 1), np.float64)
    kv_head = np.arange(n_heads) // (n_heads // values[0].shape[0])  # query heads share key/value heads in runs
    has_bias = False
    for layer in range(n_layers):
        w_o, b_o = output_weights(model, family, layer, n_heads)
        per_head = torch.einsum("hed,d->he", w_o, direction) * residual  # [H, dh]: what one unit of z_h adds
        z = at_p(f"blocks.{layer}.attn.hook_z")  # [H, dh]
        heads[layer] = (z * per_head).sum(-1).numpy()
        pattern = rec[f"blocks.{layer}.attn.hook_pattern"][0, :, -1].double()  # [H, T]
        value_read = torch.einsum("htd,hd->ht", values[layer][kv_head], per_head)  # [H, T]
        sources[layer] = (pattern * value_read).numpy()
        if b_o is not None:
            has_bias = True
            attn_bias[layer] = float(b_o @ direction) * residual
        mlp[layer] = part(at_p(f"blocks.{layer}.hook_mlp_out"))
    has_pos = "hook_pos_embed" in family.points
    has_shift, has_head_bias = getattr(final_norm(model), "bias", None) is not None, model.lm_head.bias is not None
    logit = float(logits[target] - (logits[versus] if versus >= 0 else 0.0))
    return Attribution(
        step=s, position=p, target=target, versus=int(versus), logit=logit,
        embed=part(at_p("hook_embed")),
        pos_embed=part(at_p("hook_pos_embed")) if has_pos else 0.0,
        heads=heads.astype(np.float32), attn_bias=attn_bias.astype(np.float32), mlp=mlp.astype(np.float32),
        norm_shift=shift, head_bias=head_bias, sources=sources.astype(np.float32),
        kv_head=kv_head.astype(np.int64), norm_scale=scale, norm_centres=centres,
        logit_scale=float(getattr(model.config, "logits_scaling", 1.0)),
        has_pos_embed=has_pos, has_attn_bias=has_bias,
        has_norm_shift=has_shift, has_head_bias=has_head_bias, compute_ms=(perf_counter() - t0) * 1e3,
    )


def attribution_arrays(session) -> dict[str, np.ndarray]:
    """The --export file's direct logit attribution of every step's chosen token (engine.session_format):
    attr_heads_s [L, H], attr_attn_s and attr_mlp_s [L] for each step s of the current branch, and
    attr_other [S, 5]: the logit they sum to, the embedding's, the position embedding's, the final
    norm's shift's and the LM-head bias's parts. One recompute of the step's newest position each."""
    out: dict[str, np.ndarray] = {}
    other = []
    for s in range(len(session.records)):
        a = attribute(session, step=s)
        out |= {f"attr_heads_{s}": a.heads, f"attr_attn_{s}": a.attn, f"attr_mlp_{s}": a.mlp}
        other.append((a.logit, a.embed, a.pos_embed, a.norm_shift, a.head_bias))
    out["attr_other"] = np.asarray(other, dtype=np.float32).reshape(-1, 5)
    return out

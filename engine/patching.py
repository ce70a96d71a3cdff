"""Activation patching: how much of a logit difference one place of the model restores.

Two prompts of the same length, a *clean* one (``"The capital of France is"``) and a *corrupted*
one (``"The capital of Germany is"``). For every layer l and position j, the corrupted prompt runs
with one of the clean prompt's activations put in at position j, and the logit of ``target`` minus
that of ``versus`` at the last position is read. Three places (``SITES``), named as in
TransformerLens's patching helpers:

- ``resid_pre``: the residual stream at the input of block l (``blocks.{l}.hook_resid_pre``,
  ``get_act_patch_resid_pre``): everything the prompt has put there so far;
- ``attn_out``: what block l's attention adds to the residual stream (``blocks.{l}.hook_attn_out``,
  ``get_act_patch_attn_out``);
- ``mlp_out``: what block l's MLP (or experts) adds (``blocks.{l}.hook_mlp_out``,
  ``get_act_patch_mlp_out``).

Where that difference comes back to the clean run's, the place carries what the two prompts differ
in; direct attribution cannot say this (it sees only what each part writes straight into the logit).

A layer's positions run as one batch (one row per patched position), so the cost is L forward
passes of a [P, P] batch. ``cancelled()`` is asked before each layer; ``progress(done, total)``
is told after each.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter
from typing import Callable

import numpy as np
import torch

from . import families, hf_compat
from .errors import NextTokenError


SITES = ("resid_pre", "attn_out", "mlp_out")  # TransformerLens's names: blocks.{l}.hook_<site>


class PatchingCancelled(NextTokenError):
    """The person stopped a patching run before it finished."""


@dataclass(frozen=True)
class Patching:
    """A patching map of one site. L layers, P positions (both prompts have P tokens).

    clean_ids, corrupted_ids: int64 [P]; target, versus: token ids (versus -1: target's logit alone).
    clean, corrupted: the metric (logit[target] - logit[versus] at the last position) of each run unpatched.
    metric: float32 [L, P], the metric of the corrupted run with the clean run's ``site`` of block l
        put in at position j (TransformerLens's get_act_patch_{site} with this metric).
    seconds: the run's wall time.
    clean_last, corrupted_last: float32 [V], each run's logits at the last position, unpatched (what
        each prompt predicts next).
    site: what was patched, one of ``SITES`` (the hook is ``blocks.{l}.hook_{site}``).
    """

    clean_ids: np.ndarray
    corrupted_ids: np.ndarray
    target: int
    versus: int
    clean: float
    corrupted: float
    metric: np.ndarray
    seconds: float
    clean_last: np.ndarray | None = None
    corrupted_last: np.ndarray | None = None
    site: str = "resid_pre"

    @property
    def restored(self) -> np.ndarray:
        """float32 [L, P]: (metric - corrupted) / (clean - corrupted): 1 where a patch restores the whole
        difference, 0 where it restores none (NaN everywhere when the two runs do not differ)."""
        gap = self.clean - self.corrupted
        if gap == 0:
            return np.full_like(self.metric, np.nan)
        return ((self.metric - self.corrupted) / gap).astype(np.float32)


def _metric(logits: torch.Tensor, target: int, versus: int) -> torch.Tensor:
    """[B]: logit[target] - logit[versus] (or logit[target]) at the last position of logits [B, n, V]."""
    last = logits[:, -1].float()
    return last[:, target] - (last[:, versus] if versus >= 0 else 0.0)


def _site_module(model, family, site: str, layer: int):
    """(module, is_input) where ``blocks.{layer}.hook_{site}`` is taken: the block's input for
    resid_pre, the attention's or the MLP's output (before GraniteMoe's residual multiplier, which
    scales the clean and the patched value alike) for attn_out and mlp_out."""
    point = family.points[f"blocks.{{L}}.hook_{site}"]
    return model.get_submodule(point.module.format(L=layer)), point.take == "input"


def _first(value):
    """The hidden states of a module's output (the first of a tuple)."""
    return value[0] if isinstance(value, tuple) else value


def _with_first(value, hidden):
    return (hidden, *value[1:]) if isinstance(value, tuple) else hidden


@torch.inference_mode()
def patch(model, clean_ids, corrupted_ids, target: int, versus: int = -1, site: str = "resid_pre", *,
          cancelled: Callable[[], bool] = lambda: False,
          progress: Callable[[int, int], None] = lambda done, total: None) -> Patching:
    """The ``site`` patching map of ``clean_ids`` into ``corrupted_ids`` (same length); see ``Patching``."""
    if site not in SITES:
        raise NextTokenError(f"Patching puts in one of {', '.join(SITES)}, not {site!r}.")
    clean_ids, corrupted_ids = (np.asarray(ids, dtype=np.int64) for ids in (clean_ids, corrupted_ids))
    if clean_ids.shape != corrupted_ids.shape:
        raise NextTokenError(f"Patching needs two prompts of the same length: these have {len(clean_ids)} and "
                             f"{len(corrupted_ids)} tokens, so a position of one is not the same place in the other.")
    family = families.family_of(model)
    n_layers, P = model.config.num_hidden_layers, len(clean_ids)
    t0 = perf_counter()
    sites = [_site_module(model, family, site, layer) for layer in range(n_layers)]
    clean_values: list[torch.Tensor] = []  # [P, d] each: the clean run's value at every layer
    handles = []
    try:
        for module, is_input in sites:
            if is_input:
                handles.append(module.register_forward_pre_hook(
                    lambda _m, args, kwargs: clean_values.append((args[0] if args else kwargs["hidden_states"])[0].clone()),
                    with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(
                    lambda _m, _args, output: clean_values.append(_first(output)[0].clone())))
        clean_logits = model(input_ids=torch.from_numpy(clean_ids)[None], use_cache=False).logits
    finally:
        for handle in handles:
            handle.remove()
    corrupted = model(input_ids=torch.from_numpy(corrupted_ids)[None], use_cache=False).logits
    batch = torch.from_numpy(corrupted_ids)[None].repeat(P, 1)  # row j patches position j
    rows = torch.arange(P)
    metric = np.zeros((n_layers, P), np.float32)
    for layer in range(n_layers):
        if cancelled():
            raise PatchingCancelled(f"Patching stopped after {layer} of {n_layers} layers.")
        module, is_input = sites[layer]
        clean = clean_values[layer]

        def put_in_input(_module, args, kwargs, clean=clean):
            hidden = (args[0] if args else kwargs["hidden_states"]).clone()  # [P, P, d]
            hidden[rows, rows] = clean  # row j, position j: the clean run's vector there
            if args:
                return (hidden, *args[1:]), kwargs
            return args, kwargs | {"hidden_states": hidden}

        def put_in_output(_module, _args, output, clean=clean):
            hidden = _first(output).clone()  # [P, P, d]
            hidden[rows, rows] = clean
            return _with_first(output, hidden)

        handle = (module.register_forward_pre_hook(put_in_input, with_kwargs=True) if is_input
                  else module.register_forward_hook(put_in_output))
        try:
            with hf_compat.attention(model, "sdpa"):
                logits = model(input_ids=batch, use_cache=False, logits_to_keep=1).logits
        finally:
            handle.remove()
        metric[layer] = _metric(logits, target, versus).numpy()
        progress(layer + 1, n_layers)
    return Patching(clean_ids, corrupted_ids, int(target), int(versus),
                    float(_metric(clean_logits, target, versus)[0]), float(_metric(corrupted, target, versus)[0]),
                    metric, perf_counter() - t0, clean_logits[0, -1].float().numpy(), corrupted[0, -1].float().numpy(),
                    site)


def patch_resid_pre(model, clean_ids, corrupted_ids, target: int, versus: int = -1, **kw) -> Patching:
    """TransformerLens's get_act_patch_resid_pre: ``patch`` at ``blocks.{l}.hook_resid_pre``."""
    return patch(model, clean_ids, corrupted_ids, target, versus, "resid_pre", **kw)


def patch_attn_out(model, clean_ids, corrupted_ids, target: int, versus: int = -1, **kw) -> Patching:
    """TransformerLens's get_act_patch_attn_out: ``patch`` at ``blocks.{l}.hook_attn_out``."""
    return patch(model, clean_ids, corrupted_ids, target, versus, "attn_out", **kw)


def patch_mlp_out(model, clean_ids, corrupted_ids, target: int, versus: int = -1, **kw) -> Patching:
    """TransformerLens's get_act_patch_mlp_out: ``patch`` at ``blocks.{l}.hook_mlp_out``."""
    return patch(model, clean_ids, corrupted_ids, target, versus, "mlp_out", **kw)

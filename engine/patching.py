"""Activation patching of the residual stream: how much of a logit difference one place restores.

Two prompts of the same length, a *clean* one (``"The capital of France is"``) and a *corrupted*
one (``"The capital of Germany is"``). For every layer l and position j, the corrupted prompt runs
with the clean prompt's residual stream put in at the input of block l at position j
(``blocks.{l}.hook_resid_pre``, TransformerLens's ``get_act_patch_resid_pre``), and the logit of
``target`` minus that of ``versus`` at the last position is read. Where that difference comes back
to the clean run's, the place carries what the two prompts differ in; direct attribution cannot
say this (it sees only what each part writes straight into the logit).

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

from . import families, hf_compat, hooks
from .errors import NextTokenError


class PatchingCancelled(NextTokenError):
    """The person stopped a patching run before it finished."""


@dataclass(frozen=True)
class Patching:
    """A resid_pre patching map. L layers, P positions (both prompts have P tokens).

    clean_ids, corrupted_ids: int64 [P]; target, versus: token ids (versus -1: target's logit alone).
    clean, corrupted: the metric (logit[target] - logit[versus] at the last position) of each run unpatched.
    metric: float32 [L, P], the metric of the corrupted run with the clean resid_pre of block l put
        in at position j (TransformerLens's get_act_patch_resid_pre with this metric).
    seconds: the run's wall time.
    clean_last, corrupted_last: float32 [V], each run's logits at the last position, unpatched (what
        each prompt predicts next).
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


@torch.inference_mode()
def patch_resid_pre(model, clean_ids, corrupted_ids, target: int, versus: int = -1, *,
                    cancelled: Callable[[], bool] = lambda: False,
                    progress: Callable[[int, int], None] = lambda done, total: None) -> Patching:
    """The resid_pre patching map of ``clean_ids`` into ``corrupted_ids`` (same length); see ``Patching``."""
    clean_ids, corrupted_ids = (np.asarray(ids, dtype=np.int64) for ids in (clean_ids, corrupted_ids))
    if clean_ids.shape != corrupted_ids.shape:
        raise NextTokenError(f"Patching needs two prompts of the same length: these have {len(clean_ids)} and "
                             f"{len(corrupted_ids)} tokens, so a position of one is not the same place in the other.")
    family = families.family_of(model)
    n_layers, P = model.config.num_hidden_layers, len(clean_ids)
    t0 = perf_counter()
    with hooks.capture(model, n_layers, ["blocks.{L}.hook_resid_pre"]) as rec:
        clean_logits = model(input_ids=torch.from_numpy(clean_ids)[None], use_cache=False).logits
    clean_resid = [rec[f"blocks.{layer}.hook_resid_pre"][0] for layer in range(n_layers)]  # [P, d] each
    corrupted = model(input_ids=torch.from_numpy(corrupted_ids)[None], use_cache=False).logits
    batch = torch.from_numpy(corrupted_ids)[None].repeat(P, 1)  # row j patches position j
    rows = torch.arange(P)
    metric = np.zeros((n_layers, P), np.float32)
    for layer in range(n_layers):
        if cancelled():
            raise PatchingCancelled(f"Patching stopped after {layer} of {n_layers} layers.")
        block = model.get_submodule(f"{family.layers}.{layer}")

        def put_in(_module, args, kwargs, clean=clean_resid[layer]):
            hidden = (args[0] if args else kwargs["hidden_states"]).clone()  # [P, P, d]
            hidden[rows, rows] = clean  # row j, position j: the clean run's vector there
            if args:
                return (hidden, *args[1:]), kwargs
            return args, kwargs | {"hidden_states": hidden}

        handle = block.register_forward_pre_hook(put_in, with_kwargs=True)
        try:
            with hf_compat.attention(model, "sdpa"):
                logits = model(input_ids=batch, use_cache=False, logits_to_keep=1).logits
        finally:
            handle.remove()
        metric[layer] = _metric(logits, target, versus).numpy()
        progress(layer + 1, n_layers)
    return Patching(clean_ids, corrupted_ids, int(target), int(versus),
                    float(_metric(clean_logits, target, versus)[0]), float(_metric(corrupted, target, versus)[0]),
                    metric, perf_counter() - t0, clean_logits[0, -1].float().numpy(), corrupted[0, -1].float().numpy())

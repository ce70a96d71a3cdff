"""How a step's hook points are recorded: the seam between ``Session._run`` and what runs the model.

A backend runs one forward pass and returns the same thing whichever it is: a dict of TransformerLens
hook name -> tensor (what ``engine.hooks.capture`` yields for the names and ``Keep``s asked for), the
logits and the cache, so the same record-building code in engine.session consumes all of them.
``HooksBackend`` (here) installs engine.hooks' forward hooks on the local model;
``engine.nnsight_backend.NnsightBackend`` reads the same points through nnsight's tracing, locally
or on a remote nnsight server.
"""

from __future__ import annotations

from typing import Mapping, Protocol

import torch

from . import hf_compat, hooks


class StepBackend(Protocol):
    """What ``Session`` asks of whatever runs its forward passes.

    name: "hooks" or "nnsight" (engine.runtime.BACKENDS).
    keeps_cache: False when no KV cache survives between steps (a remote step is a full forward pass
        over the text so far): the session then runs without one.
    remote_host: the server each step is sent to, "" when it runs here.
    records_in_place: engine.hooks' capture honours every ``Keep`` (a pass from position 0 runs with
        SDPA and records the kept rows of ``hook_attn_scores`` through their softmax; ``Keep.out``
        copies the residual stream as each block finishes); False: the pass runs eager and the
        backend keeps ``hook_pattern`` rows and every hooked value until the pass ends.
    """

    name: str
    keeps_cache: bool
    remote_host: str
    records_in_place: bool

    def forward(self, model, n_layers: int, input_ids: torch.Tensor, cache, *, use_cache: bool,
                keep: Mapping[str, hooks.Keep], n_new: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, object]:
        """Run ``input_ids`` [1, n] against ``cache``; return (hook name -> tensor for every name of
        ``keep``, logits [1, 1, V], the cache or None). ``n_new``: how many of the last positions the
        step records (all of them at the prefill, 1 at a decode step, also when the whole sequence is fed)."""
        ...


class HooksBackend:
    """Records a step with engine.hooks' forward hooks on the local model (the default backend)."""

    name = "hooks"
    keeps_cache = True
    remote_host = ""
    records_in_place = True

    def forward(self, model, n_layers, input_ids, cache, *, use_cache, keep, n_new):
        with hooks.capture(model, n_layers, keep) as rec:
            logits, cache = hf_compat.forward(model, input_ids, cache, use_cache=use_cache)
        return rec, logits, cache

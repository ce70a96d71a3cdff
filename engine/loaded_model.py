"""A loaded model: the transformers module, its tokenizer and its facts, with what is derived from
the weights once (the PCA basis of the embedding table, the weights' hash). Built by engine.loading,
stepped by engine.session."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from .info import ModelInfo
from .projection import Projection
from .projection import fit as fit_projection
from .step_backend import HooksBackend, StepBackend
from .tokens import Tokenizer


@dataclass
class LoadedModel:
    """A model in eval mode with the eager attention implementation, its tokenizer and its info.

    ``projection`` is the model's fixed PCA basis, fitted on first use and then kept here, with
    the weights it was fitted on. A session reopened from a file without its model has
    ``model=None`` and says why in ``missing_reason``. ``backend`` records each step
    (engine.step_backend: engine.hooks' forward hooks, or nnsight's tracing).
    """

    model: torch.nn.Module | None
    tokenizer: Tokenizer
    info: ModelInfo
    missing_reason: str = ""
    backend: StepBackend = field(default_factory=HooksBackend)
    _projection: Projection | None = field(default=None, init=False, repr=False)
    _weights_hash: str = field(default="", init=False, repr=False)

    @property
    def projection(self) -> Projection:
        if self._projection is None and self.backend.remote_host:  # the weights are on the server: fitted there
            self._projection = self.backend.embedding_projection()
        if self._projection is None:
            weight = self.model.get_input_embeddings().weight.detach()
            self._projection = fit_projection(weight.float().cpu().numpy())
        return self._projection

    @property
    def weights_hash(self) -> str:
        """"sha256:<hex>" over the state dict (each tensor's name, dtype, shape and bytes, in name order;
        a tied tensor counted once): a session file names the weights it was saved with. Computed on
        first use (0.3 s for GPT-2 small) and kept. A remote model's: "hub:<hub id>" (its weights are not here)."""
        if not self._weights_hash and self.backend.remote_host:  # no weights here: the hub id names them
            self._weights_hash = f"hub:{self.info.source}"
        if not self._weights_hash:
            digest, seen = hashlib.sha256(), set()
            for name, tensor in sorted(self.model.state_dict().items()):
                t = tensor.detach().cpu().contiguous()
                key = (t.data_ptr(), tuple(t.shape), t.dtype)
                if key in seen:  # a tied weight (lm_head.weight is transformer.wte.weight)
                    continue
                seen.add(key)
                digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
                digest.update(t.reshape(-1).view(torch.uint8).numpy().data)
            self._weights_hash = f"sha256:{digest.hexdigest()}"
        return self._weights_hash

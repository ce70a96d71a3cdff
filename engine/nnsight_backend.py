"""nnsight's tracing of the Hugging Face model as a step backend (engine.step_backend): the same hook
names with the same meanings as engine.hooks, read only through nnsight's own interface.

Each point a step records (engine.families' table for the model) is read as ``.input`` or ``.output``
of the module at its path, inside one ``model.trace(...)``; the rows the step keeps, the family's
factor (GraniteMoe's multipliers) and the dtype are applied there, and the result is ``nnsight.save``d.
No torch hook and no patch of ours touches the model, so the very same request runs on a remote
nnsight server (NDIF, or a lab's own with ``--nnsight-host``), which sends back only what was saved.

A remote step keeps no KV cache between requests: each is a full forward pass over the text so far,
saving only the rows the step records (at a decode step the newest position's). For Llama-3.1-70B
(80 layers, 64 heads, d 8,192, 128,256 tokens) a decode step brings back the two float16 block
outputs (2 x 80 x 8,192 x 2 B = 2.6 MB), 81 float32 residual vectors and the embedding (2.7 MB), the
float32 logits (0.5 MB) and one float16 attention row per layer and head (80 x 64 x T x 2 B: 10 KB a
position of text, 10 MB at 1,000): about 6 MB + 10 KB x T.

Only the views a step records are read this way: "" (the tensor as it is) and "tokens" (a router's
[tokens, ...] output). The Inside view's points (norm statistics, per-head q/k/v, RoPE, scores) are
recomputed by engine.inside on a local model; a remote model has none.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Mapping

import torch

from . import hf_compat, hooks
from .errors import NextTokenError
from .families import family_of

# The points a step may read, in the order a forward pass computes them: nnsight serves values in
# execution order (reading a module the pass already ran past is an error).
EXECUTION_ORDER = (
    "hook_embed",
    "hook_pos_embed",
    "blocks.{L}.hook_resid_pre",
    "blocks.{L}.attn.hook_pattern",
    "blocks.{L}.hook_attn_out",
    "blocks.{L}.mlp.hook_expert_indices",
    "blocks.{L}.hook_mlp_out",
    "blocks.{L}.hook_resid_post",
    "ln_final.hook_out",
)
REMOTE_TIMEOUT_S = 300.0  # how long the server may stay silent (connecting, or between status messages)


class RemoteStepError(NextTokenError):
    """A step sent to a remote nnsight server failed (network, refusal, quota, a model it does not host);
    the session is as it was before the step."""


def read_plan(model, n_layers: int, keep: Mapping[str, hooks.Keep], n_new: int) -> list[tuple]:
    """What one trace reads, module by module in execution order: (module path, "input" or "output",
    [(hook name, tuple index or None, first dim of rows ("" view: 1, 2 for 4-D; "tokens": 0), rows
    (a slice or an int64 tensor of indices), factor or None, dtype or None)]). A Keep without rows keeps the newest ``n_new`` positions,
    so nothing of the positions before them comes back."""
    points = family_of(model).points
    table = hooks.hook_table(n_layers, points)
    wanted = hooks._expand(keep, n_layers)
    order = {}
    for name in wanted:
        template = name if name.startswith(("hook_", "ln_final")) else "blocks.{L}." + name.split(".", 2)[2]
        layer = int(name.split(".")[1]) if name.startswith("blocks.") else (-1 if name.startswith("hook_") else n_layers)
        if template not in EXECUTION_ORDER:
            raise ValueError(f"The nnsight backend reads only the points a step records ({', '.join(EXECUTION_ORDER)}), not {name}.")
        order[name] = (layer, EXECUTION_ORDER.index(template))
    plan: dict[str, tuple[str, str, list]] = {}
    for name in sorted(wanted, key=order.__getitem__):
        point, k = table[name], wanted[name]
        if point.view not in ("", "tokens") or point.take not in ("input", "output") and not point.take.startswith("output["):
            raise ValueError(f"The nnsight backend cannot read {name} ({point.take}, view {point.view!r}).")
        side = "input" if point.take == "input" else "output"
        index = int(point.take[len("output["):-1]) if point.take.startswith("output[") else None
        rows = k.rows if k.rows is not None else slice(-n_new, None)  # a slice, or an int64 tensor of indices
        factor = float(getattr(model.config, point.factor)) if point.factor else None
        dim = 0 if point.view == "tokens" else None  # None: 2 for a 4-D attention pattern, else 1
        plan.setdefault(f"{point.module}.{side}", (point.module, side, []))[2].append((name, index, dim, rows, factor, k.dtype))
    return list(plan.values())


class NnsightBackend:
    """Steps through an nnsight ``TransformersModel``: locally around the loaded model, or remotely.

    lm: the nnsight model (``TransformersModel(model)`` for a local one; ``TransformersModel(hub_id)``,
        weights never loaded, for a remote one).
    remote_host: "" to run here; else the server's URL (NDIF's, or ``--nnsight-host``'s).
    simulate: run the remote request's serialized form here (nnsight's ``remote="local"``): the remote
        code path without the network, for tests.
    """

    name = "nnsight"

    def __init__(self, lm, remote_host: str = "", *, simulate: bool = False):
        self.lm = lm
        self.remote_host = remote_host
        self.simulate = simulate
        self.keeps_cache = not (remote_host or simulate)
        self.records_in_place = False  # eager attention; hook_pattern's kept rows and every value to the end

    @classmethod
    def around(cls, model, hf_tokenizer, **kwargs) -> "NnsightBackend":
        """A backend around an already loaded transformers model (no copy: nnsight wraps the same module)."""
        from nnsight.modeling.transformers import TransformersModel

        return cls(TransformersModel(model, tokenizer=hf_tokenizer, task="text-generation"), **kwargs)

    def forward(self, model, n_layers, input_ids, cache, *, use_cache, keep, n_new):
        import nnsight

        use_cache = use_cache and self.keeps_cache
        plan = read_plan(model, n_layers, keep, n_new)
        lm = self.lm
        remote = "local" if self.simulate else False
        kwargs = hf_compat.forward_kwargs(cache, use_cache=use_cache)
        # The mask over every position the pass attends to, cached ones included: without it nnsight's
        # input processing gives the new tokens a mask of their own width only.
        seen = hf_compat.cache_length(cache) if use_cache else 0
        kwargs["attention_mask"] = torch.ones(1, seen + input_ids.shape[1], dtype=torch.long)
        ids = input_ids if self.remote_host else input_ids.to(model.device)
        try:
            backend = self._remote_backend() if self.remote_host else None  # names the model: asks the hub its canonical id
            with _timeout(REMOTE_TIMEOUT_S if self.remote_host else None):
                # The body runs against the model's real values (here, or on the server): torch and
                # nnsight only, so that it runs the same there.
                with lm.trace(ids, remote=remote, backend=backend, **kwargs):
                    saved = {}
                    for path, side, entries in plan:
                        envoy = lm.get(path)
                        value = envoy.input if side == "input" else envoy.output
                        for name, index, dim, rows, factor, dtype in entries:
                            t = value if index is None else value[index]
                            t = t[0] if isinstance(t, tuple) else t
                            at = dim if dim is not None else (2 if t.ndim == 4 else 1)
                            if isinstance(rows, slice):
                                t = t[(slice(None),) * at + (rows,)]
                            else:
                                t = t.index_select(at, rows.to(t.device))
                            if factor is not None:
                                t = t * factor
                            saved[name] = t.to(dtype) if dtype is not None else t.clone()
                    saved = nnsight.save(saved)
                    out = lm.output
                    logits = nnsight.save(out.logits)
                    new_cache = nnsight.save(hf_compat.output_cache(out, use_cache))
        except NextTokenError:
            raise
        except Exception as exc:
            if not (self.remote_host or self.simulate):
                raise
            raise RemoteStepError(_remote_failure(self.remote_host, exc)) from exc
        return saved, logits, new_cache


    def embedding_projection(self, k: int = 3, chunk: int = 4096):
        """engine.projection's PCA basis of the token embedding matrix, computed where the weights are
        (on the server for a remote model): only the mean [d], k components [k, d] and their variance
        fractions come back, never the [V, d] matrix (2.1 GB for a 70B Llama in bfloat16)."""
        import nnsight

        from .projection import from_components

        lm = self.lm
        remote = "local" if self.simulate else False
        try:
            backend = self._remote_backend() if self.remote_host else None
            with _timeout(REMOTE_TIMEOUT_S if self.remote_host else None), torch.inference_mode():
                with lm.trace(torch.zeros(1, 1, dtype=torch.long), remote=remote, backend=backend):
                    w = lm.get(self.embedding_path).weight  # [V, d]
                    n = w.shape[0]
                    mean = w.double().sum(0) / n
                    cov = torch.zeros(w.shape[1], w.shape[1], dtype=torch.float64, device=w.device)
                    for i in range(0, n, chunk):  # float64 a chunk of rows at a time, as engine.projection.fit
                        rows = w[i : i + chunk].double() - mean
                        cov += rows.T @ rows
                    values, vectors = torch.linalg.eigh(cov / max(n - 1, 1))  # ascending
                    basis = nnsight.save((mean.cpu(), vectors[:, -k:].flip(-1).T.cpu(), (values.flip(0)[:k] / values.sum()).cpu()))
        except Exception as exc:
            if not (self.remote_host or self.simulate):
                raise
            raise RemoteStepError(_remote_failure(self.remote_host, exc, what="basis")) from exc
        return from_components(*(t.numpy() for t in basis))

    @property
    def embedding_path(self) -> str:
        """The token embedding's module path (model.embed_tokens, transformer.wte)."""
        return family_of(self.lm._module).points["hook_embed"].module

    def _remote_backend(self):
        """nnsight's RemoteBackend for one step, given the API key (api_key()) and no status display
        (it writes to stdout, which --json keeps for its rows)."""
        from nnsight.intervention.backends.display import StatusDisplay
        from nnsight.intervention.backends.remote import RemoteBackend

        backend = RemoteBackend(self.lm.to_model_key(), host=self.remote_host, api_key=api_key(),
                                env=self.lm._remoteable_get_env())
        backend.display = StatusDisplay(enabled=False)
        return backend


def api_key() -> str | None:
    """The NDIF API key: the environment's NDIF_API_KEY, read at each step and handed to nnsight only
    (None: nnsight's own config, ~/.config/nnsight/config.yaml). Never stored, logged or saved here."""
    return os.environ.get("NDIF_API_KEY") or None


class _timeout:
    """Bound how long a remote request may wait for the server to connect and answer (nnsight's
    websocket waits forever by default); restores the default after."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds is not None:
            import websocket

            self.before = websocket.getdefaulttimeout()
            websocket.setdefaulttimeout(self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds is not None:
            import websocket

            websocket.setdefaulttimeout(self.before)
        return False


def _remote_failure(host: str, exc: BaseException, what: str = "step") -> str:
    """One sentence for a failed remote request: where, what went wrong, and (a step) that nothing changed."""
    where = host or "the simulated server"
    if isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in str(exc).lower():
        why = f"no answer within {REMOTE_TIMEOUT_S:.0f} s"
    elif isinstance(exc, ConnectionRefusedError):
        why = "the connection was refused (is the server running?)"
    elif getattr(exc, "status_code", None):  # the server answered the websocket's handshake with an HTTP error
        why = f"the server answered {exc.status_code} {_detail(getattr(exc, 'resp_body', b''))}".rstrip()
        if exc.status_code in (401, 403):
            why += " (the API key is read from NDIF_API_KEY)"
    else:
        why = _first_line(exc)
    if what == "basis":
        return f"The PCA basis of the token embeddings could not be computed on {where}: {why.rstrip('.')}."
    return f"The step could not run on {where}: {why.rstrip('.')}. The session is as it was before the step."


def _detail(body) -> str:
    """What an error answer's body says: FastAPI's {"detail": ...}, else its first line."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:
        detail = json.loads(text).get("detail", "")
    except (ValueError, AttributeError):
        detail = text.strip().splitlines()[0] if text.strip() else ""
    return f"({str(detail)[:200]})" if detail else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]

"""Session files, writing: a whole session (every branch, every recorded value) as one ``.npz``.

A session file (``nexttoken-session/4``, laid out in engine.session_format's table and
docs/SESSION_FILE.md) is written by ``engine.export.write_npz``: the branch tree's nodes, the forward
passes they come from (two siblings that differ only in the token taken share one pass, as they
share its arrays in memory), each pass's StepRecord arrays stacked per field over passes, the prompt,
the model's name, source, shape and weights hash, its PCA projection, and the bytes of every token the
file shows, so that a session opens without its model for viewing. ``snapshot`` takes what a file
needs while the session waits; ``write_snapshot`` writes it on another thread (app.host.saver).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import sampling, session_format
from .branches import ROOT
from .errors import ExportError
from .export import write_npz
from .projection import Projection
from .sampling import SamplingSettings
from .session_format import FORMAT
from .trace import N_CANDIDATES, StepRecord

def save_session(session, path: str | os.PathLike, *, inside: bool = False) -> Path:
    """Write every branch of ``session`` to ``path`` (``.npz`` added if missing) atomically: a crash
    mid-save leaves the old file whole. ``inside`` adds, for the current path, the final
    distributions, the recomputed path arrays of engine.inside and each step's logit attribution (``python -m engine --export``;
    needs the model)."""
    return write_snapshot(snapshot(session, inside=inside), path)


def session_arrays(session, *, inside: bool = False) -> dict[str, np.ndarray]:
    """The arrays of ``session``'s file, typed as engine.session_format's table says."""
    return snapshot_arrays(snapshot(session, inside=inside))


@dataclass(frozen=True)
class SessionSnapshot:
    """What a session file holds, taken from a Session on the thread that owns it, so that another
    thread can write it while the session steps on. Cheap: the StepRecords are immutable and shared
    (no array is copied), only the tree's shape is copied.

    records: every node's record, parents before children; parents: each one's parent index (ROOT
    for a prefill); path: the indices from the prefill to the current node; token_bytes: id -> raw
    bytes, safe to read from any thread (a KeyError for a token a view-only session never saw);
    extra: arrays computed with the model while taking it (``--export``'s path arrays); meta: the
    ``meta`` JSON but for the settings table, which the arrays add.
    """

    records: tuple[StepRecord, ...]
    parents: tuple[int, ...]
    path: tuple[int, ...]
    prompt_ids: np.ndarray
    projection: Projection
    token_bytes: Mapping[int, bytes]
    inside: bool
    extra: dict
    meta: dict

    @property
    def n_branches(self) -> int:
        """Leaves of the tree: the branches the file holds."""
        return len(self.records) - len(set(self.parents) - {ROOT})


def snapshot(session, *, inside: bool = False) -> SessionSnapshot:
    """Take a SessionSnapshot of ``session`` (ExportError when there is nothing to save). Call it on the
    session's own thread; ``inside`` runs the model (``--export``) here too."""
    tree = session.tree
    nodes = tree.nodes()  # ascending ids: a parent always before its children
    if not nodes:
        raise ExportError("Nothing to save yet: step at least once.")
    index = {node: i for i, node in enumerate(nodes)}
    loaded, info = session.loaded, session.info
    extra = {}
    if inside and session.records:
        from .attribution import attribution_arrays  # torch: only for --export
        from .inside import inside_arrays

        extra = inside_arrays(session) | attribution_arrays(session)
    meta = {
        "format": FORMAT,
        "model": {"name": info.name, "source": info.source, "n_params": info.n_params, "is_demo": info.is_demo,
                  "weights_hash": loaded.weights_hash},
        "config": {"n_layer": info.n_layer, "n_head": info.n_head, "d_model": info.d_model,
                   "n_positions": info.n_positions, "vocab_size": info.vocab_size, "family": info.family,
                   "n_kv_heads": info.n_kv_heads, "d_head": info.d_head, "n_active_params": info.n_active_params},
        "tokenizer": {"eos_id": loaded.tokenizer.eos_id, "vocab_size": loaded.tokenizer.vocab_size,
                      "chat_template": info.chat_template, "special_ids": list(info.special_ids)},
        "architecture": info.architecture.to_dict() if info.architecture is not None else None,
        "chat": asdict(session.chat) if session.chat is not None else None,
        "stop_sequences": list(session.stop_sequences),
        "settings": asdict(session.settings),
        "seed": session.settings.seed,
        "use_cache": session.use_cache,
        "max_new_tokens": session.max_new_tokens,
        "dropped": tree.dropped,
        "prompt_text": loaded.tokenizer.decode(session.prompt_ids),
        "text": session.text(),
        "versions": _versions(),
    }
    return SessionSnapshot(
        records=tuple(tree.record(n) for n in nodes),
        parents=tuple(index.get(tree.parent(n), ROOT) for n in nodes),
        path=tuple(index[n] for n in tree.path(session.node)),
        prompt_ids=np.array(session.prompt_ids, dtype=np.int64),
        projection=session.projection,
        token_bytes=loaded.tokenizer.bytes_by_id(),
        inside=inside,
        extra=extra,
        meta=meta,
    )


def write_snapshot(snap: SessionSnapshot, path: str | os.PathLike) -> Path:
    """Write ``snap`` to ``path`` atomically (``engine.export.write_npz``); any thread may call it."""
    return write_npz(snapshot_arrays(snap), path)


def snapshot_arrays(snap: SessionSnapshot) -> dict[str, np.ndarray]:
    """The arrays of ``snap``'s file, typed as engine.session_format's table says."""
    records, prompt = snap.records, snap.prompt_ids
    passes: list[StepRecord] = []  # one per forward pass: siblings made by a click or a re-draw share theirs
    pass_of: dict[tuple, int] = {}
    node_pass = []
    for r in records:
        key = tuple(id(getattr(r, f)) for f in _PASS_ARRAYS) + (id(r.kv), r.forward_ms, r.step_ms)
        if key not in pass_of:
            pass_of[key] = len(passes)
            passes.append(r)
        node_pass.append(pass_of[key])

    settings_table: list[SamplingSettings] = []
    for r in records:
        if r.settings not in settings_table:
            settings_table.append(r.settings)
    path = list(snap.path)
    path_records = [records[i] for i in path]
    out: dict[str, np.ndarray] = {
        "prompt_ids": prompt,
        "node_parent": list(snap.parents),
        "node_pass": node_pass,
        "node_chosen": [r.chosen for r in records],
        "node_chosen_by": [r.chosen_by for r in records],
        "node_draw_u": [r.draw_u for r in records],
        "node_settings": [settings_table.index(r.settings) for r in records],
        "current": path[-1] if path else ROOT,
        "path": path,
        # the current path on its own, for readers of --export files
        "input_ids": np.concatenate([prompt, np.array([r.chosen for r in path_records], dtype=np.int64)]),
        "prompt_len": len(prompt),
        "chosen": [r.chosen for r in path_records],
        "draw_u": [r.draw_u for r in path_records],
        "kv_len": [r.kv.positions for r in path_records],
        "kv_bytes": [r.kv.total_bytes for r in path_records],
    }
    out |= _pass_arrays(passes)
    projection = snap.projection
    out |= {"projection_mean": projection.mean, "projection_components": projection.components,
            "projection_explained": projection.explained}
    out |= _token_table(snap.token_bytes, prompt, records, snap.parents)
    if snap.inside and path_records:
        out["probs"] = np.stack([sampling.distribution(r.logits, out["input_ids"][: len(prompt) + r.step], r.settings).probs
                                 for r in path_records])
    out |= snap.extra
    meta = dict(snap.meta, settings_table=[asdict(s) for s in settings_table])
    out["meta"] = np.array(json.dumps(meta, ensure_ascii=False))
    return session_format.typed(out)


_PASS_ARRAYS = ("input_ids", "token_embed", "pos_embed", "attn", "attn_rows", "resid", "attn_out", "mlp_out", "final_hidden", "logits")


def _pass_arrays(passes: list[StepRecord]) -> dict[str, np.ndarray]:
    """Each pass's record, stacked per field (cast by session_format.typed): rows of the n positions a pass computed are concatenated
    over passes (pass_n says how many each has); attention rows [L, H, r, T] are flattened to
    [L, H, r x T] and concatenated on the last axis (pass_attn_r says how many rows each kept)."""
    return {
        "pass_step": [r.step for r in passes],
        "pass_start": [r.start for r in passes],
        "pass_n": [r.n_new for r in passes],
        "pass_input_ids": np.concatenate([r.input_ids for r in passes]),
        "pass_token_embed": np.concatenate([r.token_embed for r in passes]),
        "pass_pos_embed": np.concatenate([r.pos_embed for r in passes]),
        "pass_resid": np.concatenate([r.resid for r in passes], axis=1),
        "pass_attn_r": [len(r.attn_rows) for r in passes],
        "pass_attn_rows": np.concatenate([r.attn_rows for r in passes]),
        "pass_attn": np.concatenate([r.attn.reshape(*r.attn.shape[:2], -1) for r in passes], axis=2),
        "pass_attn_out": np.stack([r.attn_out for r in passes]),
        "pass_mlp_out": np.stack([r.mlp_out for r in passes]),
        "pass_final_hidden": np.stack([r.final_hidden for r in passes]),
        "pass_logits": np.stack([r.logits for r in passes]),
        "pass_experts": np.stack([_experts(r) for r in passes]),
        "pass_kv_key_positions": np.stack([r.kv.key_positions for r in passes]),
        "pass_kv_value_positions": np.stack([r.kv.value_positions for r in passes]),
        "pass_kv_total_bytes": [r.kv.total_bytes for r in passes],
        "pass_kv_bytes_per_value": [r.kv.bytes_per_value for r in passes],
        "pass_forward_ms": [r.forward_ms for r in passes],
        "pass_step_ms": [r.step_ms for r in passes],
    }


def _experts(record: StepRecord) -> np.ndarray:
    """int64 [L, e]: the record's chosen experts, [L, 0] for a dense model."""
    if record.experts is not None:
        return record.experts
    return np.zeros((record.attn_out.shape[0], 0), np.int64)


def candidate_ids(logits: np.ndarray, context: np.ndarray, penalty: float, k: int = N_CANDIDATES) -> np.ndarray:
    """The ``k`` candidates ``Session.trace`` lists for that step, whatever its temperature, top-k or
    top-p: the highest penalised logits, ties by lower id."""
    penalised = sampling.apply_repetition_penalty(np.asarray(logits, dtype=np.float32), np.unique(context), penalty)
    return sampling.top_ids(penalised, k)


def _token_table(token_bytes: Mapping[int, bytes], prompt: np.ndarray, records, parents) -> dict[str, np.ndarray]:
    """The raw bytes of every token the file shows: the prompt, each node's chosen token and its top
    candidates (their readable pieces are ``tokens.readable`` of the bytes)."""
    ids = set(prompt.tolist())
    contexts: list[list[int]] = []
    for i, r in enumerate(records):
        parent = int(parents[i])
        contexts.append([] if parent == ROOT else contexts[parent] + [records[parent].chosen])
        ids.add(int(r.chosen))
        context = np.concatenate([prompt, np.array(contexts[-1], dtype=np.int64)])
        ids.update(candidate_ids(r.logits, context, r.settings.repetition_penalty).tolist())
    known, raw = [], []
    for token in sorted(ids):
        try:
            raw.append(token_bytes[token])
        except KeyError:  # a view-only session never saw this token: it stays unknown
            continue
        known.append(token)
    return {
        "token_ids": np.array(known, dtype=np.int64),
        "token_bytes_len": [len(b) for b in raw],
        "token_bytes": np.frombuffer(b"".join(raw), dtype=np.uint8).copy(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"numpy": np.__version__}
    for package in ("nexttoken", "torch", "transformers"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "unknown"
    return out

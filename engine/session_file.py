"""Session files: save a whole session (every branch, every recorded value), read one back safely, open it.

Format 3 (``nexttoken-session/3``, laid out in the README's "Session files" section) is one ``.npz``
written by ``engine.export.write_npz``: the branch tree's nodes, the forward passes they come from (two
siblings that differ only in the token taken share one pass, as they share its arrays in memory),
each pass's StepRecord arrays stacked per field over passes, the prompt, the model's name, source,
shape and weights hash, its PCA projection, and the bytes of every token the file shows, so that a
session opens without its model for viewing. Formats 1 and 2 (``python -m engine --export`` before
branches) hold the current path and part of each step: they open by running the model again.

``read_session`` imports no torch and never unpickles; every problem is an ExportError of one line
naming the file. ``open_session`` turns what was read into a Session (it imports engine.session,
hence torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from . import sampling
from .branches import ROOT
from .errors import ExportError, PromptError, SettingsError
from .export import MAX_STEPS, MAX_VOCAB, _check_inside, check_legacy, parse_meta, write_npz
from .info import ModelInfo
from .projection import Projection
from .sampling import SamplingSettings
from .tokens import readable
from .trace import N_CANDIDATES, KVStats, StepRecord

FORMAT = "nexttoken-session/3"
VERSION = 3
_FORMAT_RE = re.compile(r"nexttoken-session/(\d+)")
CHOSEN_BY = ("greedy", "sampled", "user")
REPLAY_ATOL = 1e-3  # how far a replayed step's logits may be from a format-1/2 file's before the model "differs"


# ----------------------------------------------------------------------------------- weights hash
def weights_hash(loaded) -> str:
    """sha256 over the model's state dict (each tensor's name, dtype, shape and bytes, in name order;
    a tied tensor counted once), as "sha256:<hex>". Computed once per LoadedModel and kept on it."""
    if loaded._weights_hash:
        return loaded._weights_hash
    import torch

    digest, seen = hashlib.sha256(), set()
    for name, tensor in sorted(loaded.model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        key = (t.data_ptr(), tuple(t.shape), t.dtype)
        if key in seen:  # a tied weight (lm_head.weight is transformer.wte.weight)
            continue
        seen.add(key)
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().data)
    loaded._weights_hash = f"sha256:{digest.hexdigest()}"
    return loaded._weights_hash


# --------------------------------------------------------------------------------------- writing
def save_session(session, path: str | os.PathLike, *, inside: bool = False) -> Path:
    """Write every branch of ``session`` to ``path`` (``.npz`` added if missing) atomically: a crash
    mid-save leaves the old file whole. ``inside`` adds, for the current path, the final
    distributions and the recomputed path arrays of engine.inside (``python -m engine --export``;
    needs the model)."""
    return write_npz(session_arrays(session, inside=inside), path)


def session_arrays(session, *, inside: bool = False) -> dict[str, np.ndarray]:
    """The format-3 arrays of ``session`` (see the README's "Session files")."""
    tree = session.tree
    nodes = tree.nodes()  # ascending ids: a parent always before its children
    if not nodes:
        raise ExportError("Nothing to save yet: step at least once.")
    tokenizer = session.loaded.tokenizer
    index = {node: i for i, node in enumerate(nodes)}
    records = [tree.record(n) for n in nodes]

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
    path = [index[n] for n in tree.path(session.node)]
    path_records = [records[i] for i in path]
    prompt = np.array(session.prompt_ids, dtype=np.int64)
    out: dict[str, np.ndarray] = {
        "prompt_ids": prompt,
        "node_parent": np.array([index.get(tree.parent(n), ROOT) for n in nodes], dtype=np.int64),
        "node_pass": np.array(node_pass, dtype=np.int64),
        "node_chosen": np.array([r.chosen for r in records], dtype=np.int64),
        "node_chosen_by": np.array([r.chosen_by for r in records], dtype="<U7"),
        "node_draw_u": np.array([r.draw_u for r in records], dtype=np.float64),
        "node_settings": np.array([settings_table.index(r.settings) for r in records], dtype=np.int64),
        "current": np.array(path[-1] if path else ROOT, dtype=np.int64),
        "path": np.array(path, dtype=np.int64),
        # the current path as format 2 laid it out, for readers of --export files
        "input_ids": np.concatenate([prompt, np.array([r.chosen for r in path_records], dtype=np.int64)]),
        "prompt_len": np.array(len(prompt), dtype=np.int64),
        "chosen": np.array([r.chosen for r in path_records], dtype=np.int64),
        "draw_u": np.array([r.draw_u for r in path_records], dtype=np.float64),
        "kv_len": np.array([r.kv.positions for r in path_records], dtype=np.int64),
        "kv_bytes": np.array([r.kv.total_bytes for r in path_records], dtype=np.int64),
    }
    out |= _pass_arrays(passes)
    projection = session.projection
    out |= {"projection_mean": projection.mean.astype(np.float32),
            "projection_components": projection.components.astype(np.float32),
            "projection_explained": projection.explained.astype(np.float32)}
    out |= _token_table(tokenizer, prompt, records, out["node_parent"])
    if inside and path_records:
        out["probs"] = np.stack([sampling.distribution(r.logits, out["input_ids"][: len(prompt) + r.step], r.settings).probs
                                 for r in path_records]).astype(np.float32)
        from .inside import inside_arrays  # torch: only for --export

        out |= inside_arrays(session)
    out["meta"] = np.array(json.dumps(_meta(session, settings_table), ensure_ascii=False))
    return out


_PASS_ARRAYS = ("input_ids", "token_embed", "pos_embed", "attn", "resid", "attn_out", "mlp_out", "final_hidden", "logits")


def _pass_arrays(passes: list[StepRecord]) -> dict[str, np.ndarray]:
    """Each pass's record, stacked per field: rows of the n positions a pass computed are concatenated
    over passes (pass_n says how many each has); attention rows [L, H, n, T] are flattened to
    [L, H, n x T] and concatenated on the last axis."""
    return {
        "pass_step": np.array([r.step for r in passes], dtype=np.int64),
        "pass_start": np.array([r.start for r in passes], dtype=np.int64),
        "pass_n": np.array([r.n_new for r in passes], dtype=np.int64),
        "pass_input_ids": np.concatenate([r.input_ids for r in passes]).astype(np.int64),
        "pass_token_embed": np.concatenate([r.token_embed for r in passes]).astype(np.float32),
        "pass_pos_embed": np.concatenate([r.pos_embed for r in passes]).astype(np.float32),
        "pass_resid": np.concatenate([r.resid for r in passes], axis=1).astype(np.float32),
        "pass_attn": np.concatenate([r.attn.reshape(*r.attn.shape[:2], -1) for r in passes], axis=2).astype(np.float16),
        "pass_attn_out": np.stack([r.attn_out for r in passes]).astype(np.float16),
        "pass_mlp_out": np.stack([r.mlp_out for r in passes]).astype(np.float16),
        "pass_final_hidden": np.stack([r.final_hidden for r in passes]).astype(np.float32),
        "pass_logits": np.stack([r.logits for r in passes]).astype(np.float32),
        "pass_kv_key_positions": np.stack([r.kv.key_positions for r in passes]).astype(np.int64),
        "pass_kv_value_positions": np.stack([r.kv.value_positions for r in passes]).astype(np.int64),
        "pass_kv_total_bytes": np.array([r.kv.total_bytes for r in passes], dtype=np.int64),
        "pass_kv_bytes_per_value": np.array([r.kv.bytes_per_value for r in passes], dtype=np.int64),
        "pass_forward_ms": np.array([r.forward_ms for r in passes], dtype=np.float64),
        "pass_step_ms": np.array([r.step_ms for r in passes], dtype=np.float64),
    }


def candidate_ids(logits: np.ndarray, context: np.ndarray, penalty: float, k: int = N_CANDIDATES) -> np.ndarray:
    """Every token among the ``k`` highest penalised logits (ties at the k-th included): a superset of
    the candidates ``Session.trace`` lists for that step, whatever its temperature, top-k or top-p."""
    penalised = sampling.apply_repetition_penalty(np.asarray(logits, dtype=np.float32), np.unique(context), penalty)
    k = min(k, penalised.shape[0])
    return np.flatnonzero(penalised >= np.partition(penalised, -k)[-k])


def _token_table(tokenizer, prompt: np.ndarray, records: list[StepRecord], parents: np.ndarray) -> dict[str, np.ndarray]:
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
            raw.append(tokenizer.token_bytes(token))
        except KeyError:  # a view-only session's stand-in never saw this token: it stays unknown
            continue
        known.append(token)
    return {
        "token_ids": np.array(known, dtype=np.int64),
        "token_bytes_len": np.array([len(b) for b in raw], dtype=np.int64),
        "token_bytes": np.frombuffer(b"".join(raw), dtype=np.uint8).copy(),
    }


def _meta(session, settings_table: list[SamplingSettings]) -> dict:
    info, loaded = session.info, session.loaded
    return {
        "format": FORMAT,
        "model": {"name": info.name, "source": info.source, "n_params": info.n_params, "is_demo": info.is_demo,
                  "weights_hash": weights_hash(loaded)},
        "config": {"n_layer": info.n_layer, "n_head": info.n_head, "d_model": info.d_model,
                   "n_positions": info.n_positions, "vocab_size": info.vocab_size},
        "tokenizer": {"eos_id": loaded.tokenizer.eos_id, "vocab_size": loaded.tokenizer.vocab_size},
        "settings": asdict(session.settings),
        "settings_table": [asdict(s) for s in settings_table],
        "seed": session.settings.seed,
        "use_cache": session.use_cache,
        "max_new_tokens": session.max_new_tokens,
        "dropped": session.tree.dropped,
        "prompt_text": loaded.tokenizer.decode(session.prompt_ids),
        "text": session.text(),
        "versions": _versions(),
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


# --------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class SavedSession:
    """A session file read and checked, not yet opened. numpy and the standard library only.

    name: the file's name; version: its format number (1, 2 or 3); info: the model it was saved with;
    weights_hash: "sha256:..." ("" in formats 1 and 2); prompt_ids: int64 [P]; settings: the session's
    sampling settings when saved; use_cache, max_new_tokens: the session's switches; arrays: every key
    as read (the README lists them); meta: the parsed ``meta`` JSON.
    """

    name: str
    version: int
    info: ModelInfo
    weights_hash: str
    prompt_ids: np.ndarray
    settings: SamplingSettings
    use_cache: bool
    max_new_tokens: int | None
    arrays: dict
    meta: dict

    @property
    def n_steps(self) -> int:
        """Steps on the current branch."""
        return len(self.arrays["chosen"])

    @property
    def n_nodes(self) -> int:
        """Steps in every branch (formats 1 and 2: the one branch)."""
        return len(self.arrays["node_parent"]) if self.version >= 3 else self.n_steps


def read_session(path: str | os.PathLike) -> SavedSession:
    """Read and check a session file of any format; raise ExportError naming the first problem."""
    path = Path(path)
    name = path.name
    data = _read_npz(path)
    if "meta" not in data:
        raise ExportError(f"{name} is not a nexttoken session file (it has no 'meta').")
    version = _version(name, data["meta"])
    if version < VERSION:
        return _legacy(name, version, check_legacy(name, data))  # formats 1 and 2: their own checks
    meta = parse_meta(name, data["meta"])
    _check_v3(name, data, meta)
    data["meta"] = meta
    model, config = meta["model"], meta["config"]
    info = ModelInfo(name=model["name"], source=model["source"], n_params=model["n_params"], is_demo=model["is_demo"], **config)
    return SavedSession(name, version, info, model["weights_hash"], data["prompt_ids"], _settings(name, meta["settings"]),
                        meta["use_cache"], meta["max_new_tokens"], data, meta)


def read_meta(path: str | os.PathLike) -> dict:
    """A quick look at a session file: its ``meta`` alone, parsed, its format checked (the command
    line reads it before the window opens; opening the file checks all of it). ExportError as
    ``read_session``."""
    path = Path(path)
    data = _read_npz(path, keys=("meta",))
    if "meta" not in data:
        raise ExportError(f"{path.name} is not a nexttoken session file (it has no 'meta').")
    _version(path.name, data["meta"])
    meta = parse_meta(path.name, data["meta"])
    model = meta.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("source", ""), str) or not isinstance(model.get("name", ""), str):
        raise ExportError(f"{path.name} does not say which model made it (its 'meta' has no valid 'model').")
    return meta


def _read_npz(path: Path, keys: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Every array of an .npz (or those of ``keys`` it holds), loaded without pickles; ExportError for
    anything unreadable."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                raise ExportError(f"{path.name} is not a readable .npz file (it is not a zip archive).")
        with np.load(path, allow_pickle=False) as z:
            data = {key: z[key] for key in z.files if keys is None or key in keys}
    except ExportError:
        raise
    except FileNotFoundError as exc:
        raise ExportError(f"{path} does not exist.") from exc
    except IsADirectoryError as exc:
        raise ExportError(f"{path} is a folder, not a session file.") from exc
    except Exception as exc:  # damaged zip, deflate stream or .npy header: BadZipFile, zlib.error, ValueError, EOFError
        if isinstance(exc, ValueError) and "allow_pickle" in str(exc):  # numpy refuses object arrays
            raise ExportError(f"{path.name} holds Python objects, which nexttoken never loads.") from exc
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExportError(f"{path.name} is damaged or not a readable .npz file ({first}).") from exc
    for key, value in data.items():  # a zip member that is not an .npy file comes back as bytes
        if not isinstance(value, np.ndarray):
            raise ExportError(f"{path.name} is not a nexttoken session file ('{key}' is not a numpy array).")
    return data


def _version(name: str, meta: np.ndarray) -> int:
    fmt = parse_meta(name, meta).get("format")
    match = _FORMAT_RE.fullmatch(fmt) if isinstance(fmt, str) else None
    if match is None:
        raise ExportError(f"{name} is not a nexttoken session file (its format is {fmt!r}).")
    version = int(match.group(1))
    if version > VERSION:
        raise ExportError(f"{name} was written by a newer nexttoken (format {version}; this version reads formats 1 to {VERSION}).")
    if version < 1:
        raise ExportError(f"{name} has an unknown format ({fmt}).")
    return version


def _settings(name: str, d) -> SamplingSettings:
    try:
        if not isinstance(d, dict):
            raise TypeError("not an object")
        return SamplingSettings(**d)
    except (TypeError, SettingsError) as exc:
        raise ExportError(f"{name}: saved sampling settings are not valid ({exc}).") from exc


def _legacy(name: str, version: int, d: dict) -> SavedSession:
    """A format-1 or format-2 file (engine.export.load_export has checked it)."""
    meta = d["meta"]
    try:
        model, config = meta["model"], meta["config"]
        info = ModelInfo(name=str(model["name"]), source=str(model["source"]), n_params=int(model.get("n_params", 0)),
                         is_demo=False, **{k: int(config[k]) for k in ("n_layer", "n_head", "d_model", "n_positions", "vocab_size")})
        steps = meta["settings"]
        if not isinstance(steps, list) or len(steps) != len(d["chosen"]):
            raise ValueError("one settings entry per step is needed")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{name}: 'meta' lacks the model, its shape or the settings of each step ({exc}).") from exc
    if d["logits"].shape[1] != info.vocab_size:
        raise ExportError(f"{name}: the logits have {d['logits'].shape[1]:,} columns but the model's vocabulary is {info.vocab_size:,}.")
    for s in steps:
        _settings(name, {k: v for k, v in s.items() if k != "chosen_by"} if isinstance(s, dict) else s)
    last = {k: v for k, v in steps[-1].items() if k != "chosen_by"}
    prompt = d["input_ids"][: int(d["prompt_len"])]
    return SavedSession(name, version, info, "", prompt, _settings(name, last), bool(meta.get("use_cache", True)), None, d, meta)


def _need(name: str, d: dict, key: str, dtype, shape: tuple) -> np.ndarray:
    """``d[key]`` if it has ``dtype`` and ``shape`` (None: any length on that axis), else ExportError."""
    if key not in d:
        raise ExportError(f"{name} is not a complete {FORMAT} file: it lacks '{key}'.")
    a = d[key]
    ok_shape = a.ndim == len(shape) and all(want is None or want == got for want, got in zip(shape, a.shape))
    if a.dtype != np.dtype(dtype) or not ok_shape:
        want = "[" + ", ".join("any" if s is None else str(s) for s in shape) + "]"
        raise ExportError(f"{name}: '{key}' should be {np.dtype(dtype)} {want}, found {a.dtype} {list(a.shape)}.")
    return a


def _check_v3(name: str, d: dict, meta: dict) -> None:
    """Every key's dtype and shape, the tree, the steps' positions and the token ids."""
    try:
        model, config, tok = meta["model"], meta["config"], meta["tokenizer"]
        L, H, D, V, capacity = (int(config[k]) for k in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"))
        if not (0 < L <= 1000 and 0 < H <= 1000 and 0 < D <= 100_000 and 0 < V <= MAX_VOCAB and 0 < capacity):
            raise ValueError("the model's shape is out of range")
        if not all(isinstance(model[k], str) for k in ("name", "source", "weights_hash")) or not isinstance(model["is_demo"], bool):
            raise ValueError("the model's name, source, hash or demo flag has the wrong type")
        int(model["n_params"]), int(meta["dropped"])
        if not isinstance(meta["use_cache"], bool) or not (meta["max_new_tokens"] is None or int(meta["max_new_tokens"]) >= 1):
            raise ValueError("use_cache or max_new_tokens has the wrong type")
        if not (tok["eos_id"] is None or 0 <= int(tok["eos_id"]) < V):
            raise ValueError("the end-of-text token is outside the vocabulary")
        if not 0 < int(tok["vocab_size"]) <= MAX_VOCAB:
            raise ValueError("the tokenizer's vocabulary size is out of range")
        table = [_settings(name, s) for s in meta["settings_table"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{name}: 'meta' lacks the model, its shape or the settings ({exc}).") from exc
    _settings(name, meta["settings"])

    prompt = _need(name, d, "prompt_ids", np.int64, (None,))
    P = len(prompt)
    parent = _need(name, d, "node_parent", np.int64, (None,))
    N = len(parent)
    if not 0 < N <= MAX_STEPS or not 0 < P <= capacity:
        raise ExportError(f"{name}: {N} steps and a prompt of {P} tokens are out of range.")
    node_pass = _need(name, d, "node_pass", np.int64, (N,))
    chosen = _need(name, d, "node_chosen", np.int64, (N,))
    by = d.get("node_chosen_by")
    if by is None or by.dtype.kind != "U" or by.shape != (N,) or not set(by.tolist()) <= set(CHOSEN_BY):
        raise ExportError(f"{name}: 'node_chosen_by' should hold {N} of {', '.join(CHOSEN_BY)}.")
    _need(name, d, "node_draw_u", np.float64, (N,))
    node_settings = _need(name, d, "node_settings", np.int64, (N,))
    if N and (node_settings.min() < 0 or node_settings.max() >= len(table)):
        raise ExportError(f"{name}: 'node_settings' points outside the settings table.")

    steps = _need(name, d, "pass_step", np.int64, (None,))
    Np = len(steps)
    start = _need(name, d, "pass_start", np.int64, (Np,))
    n = _need(name, d, "pass_n", np.int64, (Np,))
    if Np == 0 or n.min() < 1 or start.min() < 0 or (start + n).max() > capacity:
        raise ExportError(f"{name}: the forward passes' positions are out of range.")
    rows, attn_cells = int(n.sum()), int((n * (start + n)).sum())
    _need(name, d, "pass_input_ids", np.int64, (rows,))
    for key in ("pass_token_embed", "pass_pos_embed"):
        _need(name, d, key, np.float32, (rows, D))
    _need(name, d, "pass_resid", np.float32, (L + 1, rows, D))
    _need(name, d, "pass_attn", np.float16, (L, H, attn_cells))
    for key in ("pass_attn_out", "pass_mlp_out"):
        _need(name, d, key, np.float16, (Np, L, D))
    _need(name, d, "pass_final_hidden", np.float32, (Np, D))
    _need(name, d, "pass_logits", np.float32, (Np, V))
    for key in ("pass_kv_key_positions", "pass_kv_value_positions"):
        _need(name, d, key, np.int64, (Np, L))
    for key in ("pass_kv_total_bytes", "pass_kv_bytes_per_value"):
        _need(name, d, key, np.int64, (Np,))
    for key in ("pass_forward_ms", "pass_step_ms"):
        _need(name, d, key, np.float64, (Np,))

    token_ids = _need(name, d, "token_ids", np.int64, (None,))
    ids = d["pass_input_ids"]
    for key, a in (("prompt_ids", prompt), ("node_chosen", chosen), ("pass_input_ids", ids), ("token_ids", token_ids)):
        if len(a) and (a.min() < 0 or a.max() >= V):
            raise ExportError(f"{name}: '{key}' holds token ids outside the vocabulary (0 to {V - 1}).")

    # the tree: each node after its parent, passes shared only by siblings, one node per token a parent took
    if node_pass.min() < 0 or node_pass.max() >= Np or len(np.unique(node_pass)) != Np:
        raise ExportError(f"{name}: 'node_pass' does not use every forward pass exactly from 0 to {Np - 1}.")
    offsets = np.concatenate([[0], np.cumsum(n)])
    pass_parent: dict[int, int] = {}
    taken: set[tuple[int, int]] = set()
    for i in range(N):
        p, k = int(parent[i]), int(node_pass[i])
        if not ROOT <= p < i:
            raise ExportError(f"{name}: the node parents do not form a tree (node {i} hangs from {p}).")
        if pass_parent.setdefault(k, p) != p:
            raise ExportError(f"{name}: the node parents do not form a tree (pass {k} is shared by nodes of different parents).")
        if (p, int(chosen[i])) in taken:
            raise ExportError(f"{name}: the node parents do not form a tree (two nodes under {p} take token {int(chosen[i])}).")
        taken.add((p, int(chosen[i])))
        fed = ids[offsets[k] : offsets[k + 1]]
        if p == ROOT:
            ok = steps[k] == 0 and start[k] == 0 and n[k] == P and np.array_equal(fed, prompt)
        else:
            q = int(node_pass[p])
            ok = steps[k] == steps[q] + 1 and start[k] == start[q] + n[q] and n[k] == 1 and fed[0] == chosen[p]
        if not ok:
            raise ExportError(f"{name}: step {int(steps[k])} (node {i}) does not follow from its parent's step.")

    current = _need(name, d, "current", np.int64, ())
    path = _need(name, d, "path", np.int64, (None,))
    if not ROOT <= int(current) < N:
        raise ExportError(f"{name}: the current node {int(current)} is not in the tree.")
    expect, node = [], int(current)
    while node != ROOT:
        expect.append(node)
        node = int(parent[node])
    if path.tolist() != expect[::-1]:
        raise ExportError(f"{name}: 'path' is not the path from the prompt to the current node.")
    S = len(path)
    for key, dtype in (("input_ids", np.int64), ("chosen", np.int64), ("draw_u", np.float64), ("kv_len", np.int64), ("kv_bytes", np.int64)):
        _need(name, d, key, dtype, (P + S,) if key == "input_ids" else (S,))
    _need(name, d, "prompt_len", np.int64, ())

    lengths = _need(name, d, "token_bytes_len", np.int64, (len(token_ids),))
    raw = _need(name, d, "token_bytes", np.uint8, (None,))
    if len(token_ids) and (lengths.min() < 0 or int(lengths.sum()) != len(raw) or np.any(np.diff(token_ids) <= 0)):
        raise ExportError(f"{name}: the token table is inconsistent.")
    if not np.isin(prompt, token_ids).all():  # a token taken in a view-only session may be missing: it reads ⟨id⟩
        raise ExportError(f"{name}: the token table lacks tokens of the prompt.")

    k = _need(name, d, "projection_components", np.float32, (None, D)).shape[0]
    _need(name, d, "projection_mean", np.float32, (D,))
    _need(name, d, "projection_explained", np.float32, (k,))
    if k < 2:
        raise ExportError(f"{name}: the projection needs at least 2 components.")
    if "probs" in d:
        _need(name, d, "probs", np.float32, (S, V))
    _check_inside(name, d, S)


# --------------------------------------------------------------------------------------- opening
class SavedTokens:
    """The tokenizer of a session opened without its model: the pieces and bytes of the tokens the
    file holds (``piece``, ``token_bytes``, ``decode``, ``eos_id``, ``vocab_size``). A token it does not
    know reads ``⟨id⟩``; new text cannot be tokenized (``encode`` raises PromptError)."""

    def __init__(self, ids: np.ndarray, raw: list[bytes], eos_id: int | None, vocab_size: int, missing_reason: str):
        self._bytes = {int(i): b for i, b in zip(ids, raw)}
        self._pieces: dict[int, str] = {}
        self.eos_id, self.vocab_size, self._reason = eos_id, vocab_size, missing_reason

    def encode(self, text: str) -> list[int]:
        raise PromptError(self._reason)

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[int(token_id)]  # KeyError for a token the file does not hold

    def decode(self, ids) -> str:
        return b"".join(self._bytes.get(int(i), "\ufffd".encode()) for i in ids).decode("utf-8", errors="replace")

    def piece(self, token_id: int) -> str:
        token_id = int(token_id)
        if token_id not in self._pieces:
            raw = self._bytes.get(token_id)
            self._pieces[token_id] = readable(raw) if raw is not None else f"⟨{token_id}⟩"
        return self._pieces[token_id]


def stand_in(saved: SavedSession):
    """A LoadedModel without a model: the saved info, tokens and projection, and why it cannot step."""
    from .loading import LoadedModel

    a, info = saved.arrays, saved.info
    reason = f"This session was saved with {info.name} ({info.source}); open that model to continue stepping."
    ends = np.cumsum(a["token_bytes_len"])
    blob = a["token_bytes"].tobytes()
    raw = [blob[e - n : e] for e, n in zip(ends.tolist(), a["token_bytes_len"].tolist())]
    tok = saved.meta["tokenizer"]
    tokenizer = SavedTokens(a["token_ids"], raw, tok["eos_id"], int(tok["vocab_size"]), reason)
    loaded = LoadedModel(model=None, tokenizer=tokenizer, info=info, missing_reason=reason)
    loaded._projection = Projection(a["projection_mean"], a["projection_components"], a["projection_explained"])
    loaded._weights_hash = saved.weights_hash
    return loaded


def records(saved: SavedSession) -> list[StepRecord]:
    """Every node's StepRecord of a format-3 file, in node order; siblings share their pass's arrays."""
    a, info = saved.arrays, saved.info
    n, start = a["pass_n"], a["pass_start"]
    rows = np.concatenate([[0], np.cumsum(n)])
    cells = np.concatenate([[0], np.cumsum(n * (start + n))])
    L, H = info.n_layer, info.n_head
    passes = []
    for k in range(len(n)):
        r0, r1, t = rows[k], rows[k + 1], int(start[k] + n[k])
        kv = KVStats(a["pass_kv_key_positions"][k].copy(), a["pass_kv_value_positions"][k].copy(), int(a["pass_kv_total_bytes"][k]),
                     int(a["pass_kv_bytes_per_value"][k]), info.d_model, info.n_positions)
        arrays = dict(
            input_ids=a["pass_input_ids"][r0:r1], token_embed=a["pass_token_embed"][r0:r1], pos_embed=a["pass_pos_embed"][r0:r1],
            attn=a["pass_attn"][:, :, cells[k] : cells[k + 1]].reshape(L, H, int(n[k]), t), resid=a["pass_resid"][:, r0:r1],
            attn_out=a["pass_attn_out"][k], mlp_out=a["pass_mlp_out"][k], final_hidden=a["pass_final_hidden"][k],
            logits=a["pass_logits"][k],
        )
        # copies, as a step records them: a view would keep the whole file's array alive after its branch is dropped
        passes.append({key: np.array(v, copy=True) for key, v in arrays.items()} | dict(
            step=int(a["pass_step"][k]), start=int(start[k]), kv=kv,
            forward_ms=float(a["pass_forward_ms"][k]), step_ms=float(a["pass_step_ms"][k])))
    table = [_settings(saved.name, s) for s in saved.meta["settings_table"]]
    return [
        StepRecord(**passes[int(k)], settings=table[int(s)], chosen=int(c), chosen_by=str(by), draw_u=float(u))
        for k, s, c, by, u in zip(a["node_pass"], a["node_settings"], a["node_chosen"], a["node_chosen_by"], a["node_draw_u"])
    ]


def open_session(saved: SavedSession, loaded=None):
    """(Session, note): a Session showing exactly what was saved, and one line for the status bar.

    Format 3: with ``loaded`` holding the same weights (same hash) the session can step on (its KV
    cache starts empty: the next step runs one prefill over the path); otherwise it is view-only: a
    stand-in LoadedModel without a model, whose ``missing_reason`` a step raises as SessionError.
    Formats 1 and 2 are rebuilt by running ``loaded`` over the saved tokens (ExportError when the
    model is missing or computes other logits).
    """
    from .session import Session

    if saved.version < VERSION:
        return _replay(saved, loaded)
    info = saved.info
    same = loaded is not None and loaded.model is not None and weights_hash(loaded) == saved.weights_hash
    host = loaded if same else stand_in(saved)
    if same:
        note = f"Made with the model loaded ({info.name}): stepping can go on."
    elif loaded is None or loaded.model is None:
        note = f"To view only: it was made with {info.name}, which is not loaded; the saved steps are shown."
    else:
        note = f"To view only: the loaded model differs from {info.name}, which made it; the saved steps are shown."
    session = Session(host, saved.settings, max_new_tokens=saved.max_new_tokens, use_cache=saved.use_cache)
    session.set_prompt_ids(saved.prompt_ids)
    tree, parents = session.tree, saved.arrays["node_parent"]
    for i, record in enumerate(records(saved)):
        node = tree.put(int(parents[i]), record, host.tokenizer.piece(record.chosen))
        assert node == i, "a fresh tree numbers nodes in the order they are put"
    tree.dropped = int(saved.meta["dropped"])
    session.switch(int(saved.arrays["current"]))
    return session, note


def _replay(saved: SavedSession, loaded):
    """A format-1/2 session rebuilt by running ``loaded`` over its tokens, forcing each saved choice."""
    from .session import Session

    info, a = saved.info, saved.arrays
    if loaded is None or loaded.model is None:
        raise ExportError(
            f"{saved.name} is a format-{saved.version} file, which keeps only part of each step: load the model it "
            f"was saved with ({info.name}, {info.source}) to open it."
        )
    mine = loaded.info
    if (mine.n_layer, mine.n_head, mine.d_model, mine.vocab_size) != (info.n_layer, info.n_head, info.d_model, info.vocab_size):
        raise ExportError(f"{saved.name} was saved with {info.name} ({info.source}), a model of another shape: load that model to open it.")
    steps = saved.meta["settings"]
    session = Session(loaded, saved.settings, use_cache=saved.use_cache)
    try:
        session.set_prompt_ids(saved.prompt_ids)
    except PromptError as exc:
        raise ExportError(f"{saved.name}: {exc}") from exc
    has_u = "draw_u" in a
    for s, entry in enumerate(steps):
        session.settings = _settings(saved.name, {k: v for k, v in entry.items() if k != "chosen_by"})
        start, fed = session.next_input()
        if start + len(fed) > mine.n_positions:
            raise ExportError(f"{saved.name} holds more positions than {mine.name} reads.")
        record, _ = session._run(s, start, list(fed))
        gap = float(np.max(np.abs(record.logits - a["logits"][s])))
        if not gap <= REPLAY_ATOL * max(1.0, float(np.max(np.abs(a["logits"][s])))):
            raise ExportError(
                f"{saved.name} was saved with {info.name} ({info.source}); the loaded model computes other logits "
                f"(step {s} differs by {gap:.3g}): load that model to open it."
            )
        by = entry.get("chosen_by", "greedy" if session.settings.is_greedy else "sampled")
        u = float(a["draw_u"][s]) if has_u else float("nan")
        session._take(session.node, replace(record, chosen=int(a["chosen"][s]), chosen_by=str(by), draw_u=u))
    session.settings = saved.settings
    return session, f"A file of format {saved.version}: its {len(steps)} steps were computed again by {mine.name}."

"""Session files: save a whole session (every branch, every recorded value), read one back safely, open it.

A session file (``nexttoken-session/4``, laid out in engine.session_format's table and
docs/SESSION_FILE.md) is one ``.npz`` written by ``engine.export.write_npz``: the branch tree's nodes,
the forward passes they come from (two siblings that differ only in the token taken share one pass,
as they share its arrays in memory), each pass's StepRecord arrays stacked per field over passes, the
prompt, the model's name, source, shape and weights hash, its PCA projection, and the bytes of every
token the file shows, so that a session opens without its model for viewing.

``read_session`` imports no torch and never unpickles; every problem is an ExportError of one line
naming the file. ``open_session`` turns what was read into a Session (it imports engine.session,
hence torch).
"""

from __future__ import annotations

import json
import os
import re
from types import MappingProxyType
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from . import sampling, session_format
from .branches import ROOT
from .chat import ChatTurn
from .errors import ExportError, PromptError, SettingsError
from .export import write_npz
from .architecture import Architecture
from .info import ModelInfo
from .projection import Projection
from .sampling import SamplingSettings
from .session_format import FORMAT
from .tokens import readable
from .trace import N_CANDIDATES, KVStats, StepRecord

VERSION = int(FORMAT.rsplit("/", 1)[1])  # the number in FORMAT
_FORMAT_RE = re.compile(r"nexttoken-session/(\d+)")
CHOSEN_BY = ("greedy", "sampled", "user")
MAX_STEPS = 100_000
MAX_VOCAB = 1_000_000


# --------------------------------------------------------------------------------------- writing
def save_session(session, path: str | os.PathLike, *, inside: bool = False) -> Path:
    """Write every branch of ``session`` to ``path`` (``.npz`` added if missing) atomically: a crash
    mid-save leaves the old file whole. ``inside`` adds, for the current path, the final
    distributions and the recomputed path arrays of engine.inside (``python -m engine --export``;
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
        from .inside import inside_arrays  # torch: only for --export

        extra = inside_arrays(session)
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


# --------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class SavedSession:
    """A session file read and checked, not yet opened. numpy and the standard library only.

    name: the file's name; info: the model it was saved with; weights_hash: "sha256:..."; prompt_ids:
    int64 [P]; settings: the session's sampling settings when saved; use_cache, max_new_tokens: the
    session's switches; chat: the chat turn its prompt was made from (None: a plain prompt);
    stop_sequences: the session's; arrays: every key as read (engine.session_format lists them);
    meta: the parsed ``meta`` JSON.
    """

    name: str
    info: ModelInfo
    weights_hash: str
    prompt_ids: np.ndarray
    settings: SamplingSettings
    use_cache: bool
    max_new_tokens: int | None
    chat: ChatTurn | None
    stop_sequences: tuple[str, ...]
    arrays: dict
    meta: dict

    @property
    def n_steps(self) -> int:
        """Steps on the current branch."""
        return len(self.arrays["path"])

    @property
    def n_nodes(self) -> int:
        """Steps in every branch."""
        return len(self.arrays["node_parent"])


def read_session(path: str | os.PathLike) -> SavedSession:
    """Read and check a session file; raise ExportError naming the first problem."""
    path = Path(path)
    name = path.name
    data = _read_npz(path)
    if "meta" not in data:
        raise ExportError(f"{name} is not a nexttoken session file (it has no 'meta').")
    meta = parse_meta(name, data["meta"])
    _check(name, data, meta)
    data["meta"] = meta
    model, config, tok = meta["model"], meta["config"], meta["tokenizer"]
    info = ModelInfo(name=model["name"], source=model["source"], n_params=model["n_params"], is_demo=model["is_demo"], **config,
                     chat_template=tok["chat_template"], special_ids=tuple(tok["special_ids"]),
                     architecture=_architecture(meta.get("architecture")))
    chat = ChatTurn(**meta["chat"]) if meta["chat"] is not None else None
    return SavedSession(name, info, model["weights_hash"], data["prompt_ids"], _settings(name, meta["settings"]),
                        meta["use_cache"], meta["max_new_tokens"], chat, tuple(meta["stop_sequences"]), data, meta)


def _architecture(values) -> Architecture | None:
    """The saved Architecture (None: the file holds none: a session saved without its model's description)."""
    return None if values is None else Architecture.from_dict(values)


def read_meta(path: str | os.PathLike) -> dict:
    """A quick look at a session file: its ``meta`` alone, parsed, its format checked (the command
    line reads it before the window opens; opening the file checks all of it). ExportError as
    ``read_session``."""
    path = Path(path)
    data = _read_npz(path, keys=("meta",))
    if "meta" not in data:
        raise ExportError(f"{path.name} is not a nexttoken session file (it has no 'meta').")
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


def parse_meta(name: str, meta: np.ndarray) -> dict:
    """A session file's ``meta``: a 0-d string array holding a JSON object of this format; ExportError otherwise."""
    if meta.dtype.kind != "U" or meta.ndim != 0:
        raise ExportError(f"{name}: 'meta' should be a JSON string.")
    try:
        parsed = json.loads(str(meta))
    except json.JSONDecodeError as exc:
        raise ExportError(f"{name}: 'meta' is not valid JSON ({exc}).") from exc
    if not isinstance(parsed, dict):
        raise ExportError(f"{name}: 'meta' is not a JSON object.")
    fmt = parsed.get("format")
    match = _FORMAT_RE.fullmatch(fmt) if isinstance(fmt, str) else None
    if match is None:
        raise ExportError(f"{name} is not a nexttoken session file (its format is {fmt!r}).")
    version = int(match.group(1))
    if version > VERSION:
        raise ExportError(f"{name} was written by a newer nexttoken (format {version}; this version reads format {VERSION}).")
    if version < VERSION:
        raise ExportError(f"{name} has format {version}, written before the first release: this version reads format {VERSION}.")
    return parsed


def _settings(name: str, d) -> SamplingSettings:
    try:
        if not isinstance(d, dict):
            raise TypeError("not an object")
        return SamplingSettings(**d)
    except (TypeError, SettingsError) as exc:
        raise ExportError(f"{name}: saved sampling settings are not valid ({exc}).") from exc


def _check(name: str, d: dict, meta: dict) -> None:
    """Every key's dtype and shape (engine.session_format), then the tree, the steps' positions and the token ids."""
    try:
        model, config, tok = meta["model"], meta["config"], meta["tokenizer"]
        L, H, D, V, capacity = (int(config[k]) for k in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"))
        if not (0 < L <= 1000 and 0 < H <= 1000 and 0 < D <= 100_000 and 0 < V <= MAX_VOCAB and 0 < capacity and D % H == 0):
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
        if not (isinstance(config["family"], str) and all(type(config[k]) is int and config[k] >= 0
                                                          for k in ("n_kv_heads", "d_head", "n_active_params"))):
            raise ValueError("the model's family, key/value heads, head width or active parameters have the wrong type")
        kv, heads = config["n_kv_heads"], config["n_head"]
        if kv and not (type(heads) is int and 0 < kv <= heads and heads % kv == 0):
            raise ValueError(f"{kv} key/value heads cannot serve {heads} query heads (each serves the same number)")
        if set(config) != _CONFIG_KEYS:
            raise ValueError(f"'config' should hold {', '.join(sorted(_CONFIG_KEYS))}")
        if not isinstance(tok["chat_template"], bool) or not all(type(i) is int and 0 <= i < V for i in tok["special_ids"]):
            raise ValueError("the tokenizer's chat template flag or special tokens are not valid")
        arch = meta.get("architecture")
        if arch is not None and not (isinstance(arch, dict) and set(arch) == {f.name for f in fields(Architecture)}):
            raise ValueError("'architecture' should hold every fact of engine.architecture.Architecture")
        chat = meta["chat"]
        if chat is not None and not (isinstance(chat, dict) and set(chat) == {"system", "user"}
                                     and all(isinstance(v, str) for v in chat.values())):
            raise ValueError("'chat' should be null or a system and a user message")
        if not all(isinstance(text, str) and text for text in meta["stop_sequences"]):
            raise ValueError("every stop sequence should be text of at least one character")
        table = [_settings(name, s) for s in meta["settings_table"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{name}: 'meta' lacks the model, its shape or the settings ({exc}).") from exc
    _settings(name, meta["settings"])

    KV, dh = config["n_kv_heads"] or H, config["d_head"] or D // H  # 0: GPT-2's (full heads, d / H)
    size = session_format.check(name, d, {"L": L, "H": H, "KV": KV, "d": D, "dh": dh, "V": V})
    P, N, Np = size["P"], size["N"], size["F"]
    if not 0 < N <= MAX_STEPS or not 0 < P <= capacity:
        raise ExportError(f"{name}: {N} steps and a prompt of {P} tokens are out of range.")
    prompt, parent, node_pass, chosen = d["prompt_ids"], d["node_parent"], d["node_pass"], d["node_chosen"]
    if not set(d["node_chosen_by"].tolist()) <= set(CHOSEN_BY):
        raise ExportError(f"{name}: 'node_chosen_by' should hold {N} of {', '.join(CHOSEN_BY)}.")
    node_settings = d["node_settings"]
    if node_settings.min() < 0 or node_settings.max() >= len(table):
        raise ExportError(f"{name}: 'node_settings' points outside the settings table.")
    steps, start, n = d["pass_step"], d["pass_start"], d["pass_n"]
    if Np == 0 or n.min() < 1 or start.min() < 0 or (start + n).max() > capacity:
        raise ExportError(f"{name}: the forward passes' positions are out of range.")
    kept, rows = d["pass_attn_r"], d["pass_attn_rows"]
    owner = np.repeat(np.arange(Np), kept) if kept.min() >= 1 and (kept <= n).all() else None
    if owner is None or ((rows < start[owner]) | (rows >= (start + n)[owner])).any() or (np.diff(rows)[np.diff(owner) == 0] <= 0).any() \
            or (rows[np.cumsum(kept) - 1] != start + n - 1).any():
        raise ExportError(f"{name}: 'pass_attn_rows' are not ascending positions of their passes, each ending at its last.")
    token_ids, ids = d["token_ids"], d["pass_input_ids"]
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

    current = int(d["current"])
    if not ROOT <= current < N:
        raise ExportError(f"{name}: the current node {current} is not in the tree.")
    expect, node = [], current
    while node != ROOT:
        expect.append(node)
        node = int(parent[node])
    if d["path"].tolist() != expect[::-1]:
        raise ExportError(f"{name}: 'path' is not the path from the prompt to the current node.")

    lengths, raw = d["token_bytes_len"], d["token_bytes"]
    if len(token_ids) and (lengths.min() < 0 or int(lengths.sum()) != len(raw) or np.any(np.diff(token_ids) <= 0)):
        raise ExportError(f"{name}: the token table is inconsistent.")
    if not np.isin(prompt, token_ids).all():  # a token taken in a view-only session may be missing: it reads ⟨id⟩
        raise ExportError(f"{name}: the token table lacks tokens of the prompt.")
    if size["k"] < 2:
        raise ExportError(f"{name}: the projection needs at least 2 components.")


_CONFIG_KEYS = {"n_layer", "n_head", "d_model", "n_positions", "vocab_size", "family", "n_kv_heads", "d_head", "n_active_params"}


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

    def bytes_by_id(self) -> Mapping[int, bytes]:
        """The bytes of every token the file holds, by id (read-only; any thread may read it)."""
        return MappingProxyType(self._bytes)

    def decode(self, ids) -> str:
        return b"".join(self._bytes.get(int(i), "\ufffd".encode()) for i in ids).decode("utf-8", errors="replace")

    def piece(self, token_id: int) -> str:
        token_id = int(token_id)
        if token_id not in self._pieces:
            raw = self._bytes.get(token_id)
            self._pieces[token_id] = readable(raw) if raw is not None else f"⟨{token_id}⟩"
        return self._pieces[token_id]


@dataclass(frozen=True)
class ViewOnlyModel:
    """What a session opened without its model runs on, in place of a LoadedModel: the saved info,
    tokens, projection and weights hash, no model (``model`` is None), and why it cannot step
    (``missing_reason``, which a step raises as SessionError)."""

    tokenizer: SavedTokens
    info: ModelInfo
    projection: Projection
    weights_hash: str
    missing_reason: str
    model: None = None


def view_only_model(saved: SavedSession) -> ViewOnlyModel:
    """The saved session's model as far as the file knows it: enough to show every step, not to take one."""
    a, info = saved.arrays, saved.info
    reason = f"This session was saved with {info.name} ({info.source}); open that model to continue stepping."
    ends = np.cumsum(a["token_bytes_len"])
    blob = a["token_bytes"].tobytes()
    raw = [blob[e - n : e] for e, n in zip(ends.tolist(), a["token_bytes_len"].tolist())]
    tok = saved.meta["tokenizer"]
    tokenizer = SavedTokens(a["token_ids"], raw, tok["eos_id"], int(tok["vocab_size"]), reason)
    projection = Projection(a["projection_mean"], a["projection_components"], a["projection_explained"])
    return ViewOnlyModel(tokenizer, info, projection, saved.weights_hash, reason)


def records(saved: SavedSession) -> list[StepRecord]:
    """Every node's StepRecord, in node order; siblings share their pass's arrays."""
    a, info = saved.arrays, saved.info
    n, start = a["pass_n"], a["pass_start"]
    rows = np.concatenate([[0], np.cumsum(n)])
    kept = np.concatenate([[0], np.cumsum(a["pass_attn_r"])])
    cells = np.concatenate([[0], np.cumsum(a["pass_attn_r"] * (start + n))])
    L, H = info.n_layer, info.n_head
    passes = []
    for k in range(len(n)):
        r0, r1, t = rows[k], rows[k + 1], int(start[k] + n[k])
        kv = KVStats(a["pass_kv_key_positions"][k].copy(), a["pass_kv_value_positions"][k].copy(), int(a["pass_kv_total_bytes"][k]),
                     int(a["pass_kv_bytes_per_value"][k]), info.d_model, info.n_positions, *info.kv_widths())
        arrays = dict(
            input_ids=a["pass_input_ids"][r0:r1], token_embed=a["pass_token_embed"][r0:r1], pos_embed=a["pass_pos_embed"][r0:r1],
            attn=a["pass_attn"][:, :, cells[k] : cells[k + 1]].reshape(L, H, int(kept[k + 1] - kept[k]), t),
            attn_rows=a["pass_attn_rows"][kept[k] : kept[k + 1]], resid=a["pass_resid"][:, r0:r1],
            attn_out=a["pass_attn_out"][k], mlp_out=a["pass_mlp_out"][k], final_hidden=a["pass_final_hidden"][k],
            logits=a["pass_logits"][k], experts=a["pass_experts"][k] if a["pass_experts"].shape[-1] else None,
        )
        # copies, as a step records them: a view would keep the whole file's array alive after its branch is dropped
        passes.append({key: v if v is None else np.array(v, copy=True) for key, v in arrays.items()} | dict(
            step=int(a["pass_step"][k]), start=int(start[k]), kv=kv,
            forward_ms=float(a["pass_forward_ms"][k]), step_ms=float(a["pass_step_ms"][k])))
    table = [_settings(saved.name, s) for s in saved.meta["settings_table"]]
    return [
        StepRecord(**passes[int(k)], settings=table[int(s)], chosen=int(c), chosen_by=str(by), draw_u=float(u))
        for k, s, c, by, u in zip(a["node_pass"], a["node_settings"], a["node_chosen"], a["node_chosen_by"], a["node_draw_u"])
    ]


def open_session(saved: SavedSession, loaded=None):
    """(Session, note): a Session showing exactly what was saved, and one line for the status bar.

    With ``loaded`` holding the same weights (same hash) the session can step on (its KV cache starts
    empty: the next step runs one prefill over the path); otherwise it is view-only, on a
    ``ViewOnlyModel``.
    """
    from .session import Session

    info = saved.info
    same = loaded is not None and loaded.model is not None and loaded.weights_hash == saved.weights_hash
    host = loaded if same else view_only_model(saved)
    if same:
        note = f"Made with the model loaded ({info.name}): stepping can go on."
    elif loaded is None or loaded.model is None:
        note = f"To view only: it was made with {info.name}, which is not loaded; the saved steps are shown."
    else:
        note = f"To view only: the loaded model differs from {info.name}, which made it; the saved steps are shown."
    session = Session(host, saved.settings, max_new_tokens=saved.max_new_tokens, use_cache=saved.use_cache,
                      stop_sequences=saved.stop_sequences)
    session.set_prompt_ids(saved.prompt_ids)
    session.chat = saved.chat  # the file's tokens as they are: the template is not applied again
    tree, parents = session.tree, saved.arrays["node_parent"]
    for i, record in enumerate(records(saved)):
        node = tree.put(int(parents[i]), record, host.tokenizer.piece(record.chosen))
        assert node == i, "a fresh tree numbers nodes in the order they are put"
    tree.dropped = int(saved.meta["dropped"])
    session.switch(int(saved.arrays["current"]))
    return session, note

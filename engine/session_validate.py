"""Session files, validation: the ``meta`` JSON and every array checked before anything is used.

Every array's dtype and shape against engine.session_format's table, then the branch tree, the
steps' positions and the token ids. numpy and the standard library only; never unpickles. Every
problem is an ExportError of one line naming the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields

import numpy as np

from . import session_format
from .branches import ROOT
from .errors import ExportError, SettingsError
from .architecture import Architecture
from .sampling import SamplingSettings
from .session_format import FORMAT

VERSION = int(FORMAT.rsplit("/", 1)[1])  # the number in FORMAT
_FORMAT_RE = re.compile(r"nexttoken-session/(\d+)")
CHOSEN_BY = ("greedy", "sampled", "user")
MAX_STEPS = 100_000
MAX_VOCAB = 1_000_000
_CONFIG_KEYS = {"n_layer", "n_head", "d_model", "n_positions", "vocab_size", "family", "n_kv_heads", "d_head", "n_active_params"}


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


def saved_settings(name: str, d) -> SamplingSettings:
    try:
        if not isinstance(d, dict):
            raise TypeError("not an object")
        return SamplingSettings(**d)
    except (TypeError, SettingsError) as exc:
        raise ExportError(f"{name}: saved sampling settings are not valid ({exc}).") from exc


def check_file(name: str, d: dict, meta: dict) -> None:
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
        table = [saved_settings(name, s) for s in meta["settings_table"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{name}: 'meta' lacks the model, its shape or the settings ({exc}).") from exc
    saved_settings(name, meta["settings"])

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

"""Atomic .npz writing, and the reader of session files of formats 1 and 2 (before branches).

Format 3 (engine.session_file) replaced these; files of formats 1 and 2 still open (engine.session_file
checks them with ``check_legacy`` and rebuilds their steps with the model). Their keys (S steps, P
prompt tokens, L layers, H heads, d = d_model, V = vocabulary):
    input_ids int64 [P + S], prompt_len int64 [], chosen int64 [S],
    logits float32 [S, V] (raw logits each chosen token was drawn from),
    probs float32 [S, V] (the final distribution it was drawn from),
    draw_u float64 [S] (the draw's u, since format 2),
    attn_prefill_{L} float32 [H, P, P], attn_step_{s}_{L} float32 [H, 1, P + s] for s = 1..S-1,
    resid_prefill float32 [L + 1, P, d], kv_len int64 [S], kv_bytes int64 [S],
    meta: a JSON string (model, config, settings per step, seed, library versions),
    and optionally the path at each step's newest position (q_{s}, ..., lens_logits_{s}, final_hidden;
    format 3 --export files hold them too, checked by ``_check_inside``).
Reading never unpickles (``allow_pickle=False``) and checks every key's dtype and shape.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from .errors import ExportError

FORMAT = "nexttoken-session/2"  # the newest format this module reads; engine.session_file writes format 3
READABLE_FORMATS = ("nexttoken-session/1", FORMAT)
MAX_STEPS = 100_000
MAX_VOCAB = 1_000_000


def write_npz(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> Path:
    """Write ``arrays`` as an .npz (``pack_npz``) to a temporary file beside ``path``, fsync it, then
    rename it over ``path``: a crash mid-write leaves the old file whole and no temporary behind."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # mkstemp's are owner-only
            with os.fdopen(fd, "wb") as f:
                pack_npz(f, arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ExportError(f"Could not write {path}: {exc.strerror or exc}.") from exc
    return path


def pack_npz(f, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to the binary file ``f`` as an .npz that ``np.load`` reads: one .npy member
    each, as ``np.savez_compressed`` writes them, but float32 and float64 arrays stored as they are
    (logits and residual streams shrink by under a tenth, at about 20 MB/s) and the rest (ids,
    float16 attention, JSON) deflated at level 1: a 1,000-step session saves several times faster."""
    with zipfile.ZipFile(f, "w", allowZip64=True) as archive:
        for key, value in arrays.items():
            a = np.asanyarray(value)
            stored = a.dtype.kind == "f" and a.dtype.itemsize >= 4
            archive.compression = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED  # for the next member
            archive.compresslevel = None if stored else 1
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, a, allow_pickle=False)


def parse_meta(name: str, meta: np.ndarray) -> dict:
    """A session file's ``meta``: a 0-d string array holding a JSON object; ExportError otherwise."""
    if meta.dtype.kind != "U" or meta.ndim != 0:
        raise ExportError(f"{name}: 'meta' should be a JSON string.")
    try:
        parsed = json.loads(str(meta))
    except json.JSONDecodeError as exc:
        raise ExportError(f"{name}: 'meta' is not valid JSON ({exc}).") from exc
    if not isinstance(parsed, dict):
        raise ExportError(f"{name}: 'meta' is not a JSON object.")
    return parsed


def load_export(path: str | os.PathLike) -> dict:
    """Read and check a format-1 or format-2 file; raise ExportError naming the first problem."""
    from .session_file import _read_npz  # the one reader of .npz files

    path = Path(path)
    return check_legacy(path.name, _read_npz(path))


LEGACY_KEYS = {"input_ids", "prompt_len", "chosen", "logits", "probs", "kv_len", "kv_bytes", "meta"}


def check_legacy(name: str, data: dict) -> dict:
    """Check the arrays of a format-1 or format-2 file (``meta`` parsed in place); returns ``data``."""
    missing = LEGACY_KEYS - set(data)
    if missing:
        raise ExportError(f"{name} is not a nexttoken session: it lacks {', '.join(sorted(missing))}.")
    _check(name, data)
    return data


def _check(name: str, d: dict) -> None:
    def need(key: str, kinds: str, ndim: int):
        a = d[key]
        if a.dtype.kind not in kinds or a.ndim != ndim:
            raise ExportError(f"{name}: '{key}' should be a {ndim}-D {'integer' if kinds == 'i' else 'float'} array, found {a.dtype} {a.shape}.")
        return a

    ids = need("input_ids", "i", 1)
    need("prompt_len", "i", 0)
    chosen = need("chosen", "i", 1)
    steps, prompt_len = len(chosen), int(d["prompt_len"])
    if not 0 < steps <= MAX_STEPS or not 0 < prompt_len or len(ids) != prompt_len + steps:
        raise ExportError(f"{name}: {len(ids)} input ids do not match a prompt of {prompt_len} and {steps} steps.")
    for key in ("logits", "probs"):
        a = need(key, "f", 2)
        if a.shape[0] != steps or not 0 < a.shape[1] <= MAX_VOCAB:
            raise ExportError(f"{name}: '{key}' has shape {a.shape}, expected [{steps}, vocabulary].")
    for key in ("kv_len", "kv_bytes"):
        if need(key, "i", 1).shape != (steps,):
            raise ExportError(f"{name}: '{key}' should hold {steps} values.")
    if "draw_u" in d and need("draw_u", "f", 1).shape != (steps,):
        raise ExportError(f"{name}: 'draw_u' should hold {steps} values.")
    if ids.min() < 0 or ids.max() >= d["logits"].shape[1]:
        raise ExportError(f"{name}: token ids fall outside the vocabulary.")
    _check_inside(name, d, steps)
    parsed = parse_meta(name, d["meta"])
    if parsed.get("format") not in READABLE_FORMATS:
        raise ExportError(f"{name}: 'meta' does not describe a {FORMAT} file (or an older one).")
    if parsed["format"] == FORMAT and "draw_u" not in d:
        raise ExportError(f"{name}: a {FORMAT} file must hold 'draw_u'.")
    d["meta"] = parsed


# key -> (dtype kind, ndim) of the per-step path arrays; optional (files written before them lack them)
_INSIDE_KEYS = {"q": ("f", 3), "k": ("f", 3), "v": ("f", 3), "z": ("f", 3), "scores": ("f", 3), "attn_out": ("f", 2),
                "resid_mid": ("f", 2), "mlp_out": ("f", 2), "mlp_pre": ("f", 2), "mlp_post": ("f", 2),
                "lens_ids": ("i", 2), "lens_logits": ("f", 2)}


def _check_inside(name: str, d: dict, steps: int) -> None:
    """Check the path arrays where the file has them: each key for every step or for none, right kind and rank."""
    for key, (kind, ndim) in _INSIDE_KEYS.items():
        present = [f"{key}_{s}" in d for s in range(steps)]
        if not any(present):
            continue
        if not all(present):
            raise ExportError(f"{name}: '{key}_{{s}}' is missing for step {present.index(False)}.")
        for s in range(steps):
            a = d[f"{key}_{s}"]
            if a.dtype.kind != kind or a.ndim != ndim:
                raise ExportError(f"{name}: '{key}_{s}' should be a {ndim}-D {'integer' if kind == 'i' else 'float'} array, found {a.dtype} {a.shape}.")
    if "final_hidden" in d and (d["final_hidden"].dtype.kind != "f" or d["final_hidden"].ndim != 2 or len(d["final_hidden"]) != steps):
        raise ExportError(f"{name}: 'final_hidden' should be a float array of {steps} rows, found {d['final_hidden'].dtype} {d['final_hidden'].shape}.")

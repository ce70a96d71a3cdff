"""Save a session as a ``.npz`` file and read one back, safely.

Keys written (S steps, P prompt tokens, L layers, H heads, d = d_model, V = vocabulary):
    input_ids int64 [P + S], prompt_len int64 [], chosen int64 [S],
    logits float32 [S, V] (raw logits each chosen token was drawn from),
    probs float32 [S, V] (the final distribution it was drawn from),
    draw_u float64 [S] (the draw's u: ``chosen`` is the first token, in descending ``probs`` order
        with ties by lower id, whose float64 cumulative probability exceeds it; NaN for greedy steps
        and user choices; since format 2),
    attn_prefill_{L} float32 [H, P, P], attn_step_{s}_{L} float32 [H, 1, P + s] for s = 1..S-1,
    resid_prefill float32 [L + 1, P, d], kv_len int64 [S], kv_bytes int64 [S],
    meta: a JSON string (model, config, settings per step, seed, library versions),
    and the path at each step's newest position (engine.inside.inside_arrays, dh = d / H, m = 4 d):
    q_{s}, k_{s}, v_{s}, z_{s} float32 [L, H, dh], scores_{s} float32 [L, H, P + s],
    attn_out_{s}, resid_mid_{s}, mlp_out_{s} float32 [L, d], mlp_pre_{s}, mlp_post_{s} float32 [L, m],
    lens_ids_{s} int64 / lens_logits_{s} float32 [L + 1, 10], final_hidden float32 [S, d].
Reading never unpickles (``allow_pickle=False``) and checks every key's dtype and shape.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from . import sampling
from .errors import ExportError

FORMAT = "nexttoken-session/2"  # 2: adds draw_u; seeds draw differently from format 1
READABLE_FORMATS = ("nexttoken-session/1", FORMAT)
MAX_STEPS = 100_000
MAX_VOCAB = 1_000_000


def session_arrays(session) -> dict[str, np.ndarray]:
    """The export's arrays for every step of ``session``."""
    records = session.records
    if not records:
        raise ExportError("Nothing to save yet: step at least once.")
    prompt_len = len(session.prompt_ids)
    out: dict[str, np.ndarray] = {
        "input_ids": session.token_ids(),
        "prompt_len": np.array(prompt_len, dtype=np.int64),
        "chosen": np.array([r.chosen for r in records], dtype=np.int64),
        "draw_u": np.array([r.draw_u for r in records], dtype=np.float64),
        "logits": np.stack([r.logits for r in records]).astype(np.float32),
        "kv_len": np.array([r.kv.positions for r in records], dtype=np.int64),
        "kv_bytes": np.array([r.kv.total_bytes for r in records], dtype=np.int64),
        "resid_prefill": records[0].resid.astype(np.float32),
    }
    ids = out["input_ids"]
    out["probs"] = np.stack(
        [sampling.distribution(r.logits, ids[: prompt_len + r.step], r.settings).probs for r in records]
    ).astype(np.float32)
    for r in records:
        for layer in range(r.attn.shape[0]):
            key = f"attn_prefill_{layer}" if r.step == 0 else f"attn_step_{r.step}_{layer}"
            out[key] = r.attn[layer].astype(np.float32)
    out.update(_inside_arrays(session))
    out["meta"] = np.array(json.dumps(_meta(session), ensure_ascii=False))
    return out


def _inside_arrays(session) -> dict[str, np.ndarray]:
    from .inside import inside_arrays  # torch: imported only when a session is saved

    return inside_arrays(session)


def _meta(session) -> dict:
    import torch
    import transformers

    info = session.info
    return {
        "format": FORMAT,
        "model": {"name": info.name, "source": info.source, "n_params": info.n_params},
        "config": {
            "n_layer": info.n_layer,
            "n_head": info.n_head,
            "d_model": info.d_model,
            "n_positions": info.n_positions,
            "vocab_size": info.vocab_size,
        },
        "settings": [vars(r.settings) | {"chosen_by": r.chosen_by} for r in session.records],
        "seed": session.settings.seed,
        "use_cache": session.use_cache,
        "text": session.text(),
        "versions": {"numpy": np.__version__, "torch": torch.__version__, "transformers": transformers.__version__},
    }


def save_session(session, path: str | os.PathLike) -> Path:
    """Write the session to ``path`` atomically: a crash mid-write leaves no broken file."""
    return write_npz(session_arrays(session), path)


def write_npz(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez_compressed(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ExportError(f"Could not write {path}: {exc.strerror or exc}.") from exc
    return path


def load_export(path: str | os.PathLike) -> dict:
    """Read and check a saved session; raise ExportError naming the first problem."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                raise ExportError(f"{path.name} is not a readable .npz file (it is not a zip archive).")
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            missing = {"input_ids", "prompt_len", "chosen", "logits", "probs", "kv_len", "kv_bytes", "meta"} - names
            if missing:
                raise ExportError(f"{path.name} is not a nexttoken session: it lacks {', '.join(sorted(missing))}.")
            data = {name: z[name] for name in names}
    except ExportError:
        raise
    except FileNotFoundError as exc:
        raise ExportError(f"{path} does not exist.") from exc
    except Exception as exc:  # damaged zip, deflate stream or .npy header: zlib.error, ValueError, ...
        if isinstance(exc, ValueError) and "allow_pickle" in str(exc):  # numpy refuses object arrays
            raise ExportError(f"{path.name} holds Python objects, which nexttoken never loads ({exc}).") from exc
        raise ExportError(f"{path.name} is not a readable .npz file ({exc}).") from exc
    _check(path.name, data)
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
    meta = d["meta"]
    if meta.dtype.kind != "U" or meta.ndim != 0:
        raise ExportError(f"{name}: 'meta' should be a JSON string.")
    try:
        parsed = json.loads(str(meta))
    except json.JSONDecodeError as exc:
        raise ExportError(f"{name}: 'meta' is not valid JSON ({exc}).") from exc
    if not isinstance(parsed, dict) or parsed.get("format") not in READABLE_FORMATS:
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

"""Session files, reading and opening: ``read_session`` reads a file and has it checked
(engine.session_validate), ``read_meta`` its meta alone (the command line, before the window opens),
``open_session`` turns what was read into a Session.

``read_session`` imports no torch and never unpickles; every problem is an ExportError of one line
naming the file. ``open_session`` imports engine.session, hence torch, when called.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .chat import ChatTurn
from .errors import ExportError, PromptError
from .architecture import Architecture
from .info import ModelInfo
from .projection import Projection
from .sampling import SamplingSettings
from .tokens import readable
from .session_validate import check_file, parse_meta, saved_settings
from .trace import KVStats, StepRecord

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
    check_file(name, data, meta)
    data["meta"] = meta
    model, config, tok = meta["model"], meta["config"], meta["tokenizer"]
    info = ModelInfo(name=model["name"], source=model["source"], n_params=model["n_params"], is_demo=model["is_demo"], **config,
                     chat_template=tok["chat_template"], special_ids=tuple(tok["special_ids"]),
                     architecture=_architecture(meta.get("architecture")))
    chat = ChatTurn(**meta["chat"]) if meta["chat"] is not None else None
    return SavedSession(name, info, model["weights_hash"], data["prompt_ids"], saved_settings(name, meta["settings"]),
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
    table = [saved_settings(saved.name, s) for s in saved.meta["settings_table"]]
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

"""The tables and the text the window exports: rows built from a SessionResult. No Qt, no torch.

``candidate_rows`` is the current step's candidates through every sampling stage (the numbers of the
Sampling view, unrounded); ``history_rows`` is one row per step of the history (what the Tokens and
Candidates panels say of each step). ``write_csv`` writes either with the csv module: UTF-8 with a
byte-order mark (so Excel reads it as UTF-8; Python reads it with ``encoding="utf-8-sig"`` and
pandas as it is), a header row, ``-inf`` for a logit a filter removed and an empty cell for a
value that does not exist (NaN). ``why_rows`` is the Why view's split of one logit into its parts.
``text`` is the prompt and the generated text, as plain text.

Token text: ``token`` is the token's text as decoded (a leading space kept; broken UTF-8 as U+FFFD,
as ``Tokenizer.decode`` does), ``shown_as`` its readable piece as the window shows it (``␣cat``).
"""

from __future__ import annotations

import csv
import errno
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from engine.sampling import distribution, entropy_bits, softmax
from engine.tokens import piece_bytes

CANDIDATE_COLUMNS = (
    "step", "rank", "token", "shown_as", "id", "logit_raw", "model_prob", "logit_after_penalty", "logit_after_temperature",
    "logit_after_top_k", "prob_before_top_p", "top_p_cumulative", "logit_after_top_p", "sampling_prob", "removed_by",
    "draw_start", "draw_end", "chosen",
)  # fmt: skip
"""Columns of the candidates table, one stage after another in the order they are applied."""

HISTORY_COLUMNS = (
    "step", "token", "shown_as", "id", "chosen_by", "sampling_prob", "model_prob", "rank", "sampling_entropy_bits",
    "model_entropy_bits", "cache_len", "forward_ms", "step_ms", "draw_u", "settings",
)  # fmt: skip
"""Columns of the history table, one row per step (0 = the prefill)."""


class TableError(ValueError):
    """Nothing to export yet (no step has run); the message says so in words."""


def decoded(piece: str) -> str:
    """A readable piece (``␣cat``) as the text it stands for (`` cat``)."""
    return piece_bytes(piece).decode("utf-8", "replace")


def candidate_rows(result) -> list[dict]:
    """The current step's candidates, best first by penalised logit (the order of the Candidates
    panel): the trace's ``candidate_ids`` and, when it was drawn from further down, the chosen token
    last. ``rank`` is 1-based in that order. Logits are float32 as computed (``-inf`` where a filter
    removed the token); ``model_prob`` is the model probability (softmax of the raw logits),
    ``prob_before_top_p`` what top-p reads (softmax after temperature and top-k),
    ``top_p_cumulative`` its running total, ``sampling_prob`` the sampling probability (what the
    token is drawn from); ``draw_start``/``draw_end`` the
    token's stretch of [0, 1) in the draw (empty for a removed token)."""
    trace = _trace(result)
    dist, record = trace.distribution, trace.record
    ids = np.asarray(trace.candidate_ids, dtype=np.int64)
    pieces = tuple(trace.candidate_pieces)
    if record.chosen not in ids:
        ids = np.append(ids, record.chosen)
        pieces += (trace.chosen_piece,)
    st = dist.stages(ids)
    model = softmax(record.logits)
    rows = []
    for i, (token, piece) in enumerate(zip(ids, pieces)):
        t = int(token)
        rows.append({
            "step": record.step, "rank": i + 1, "token": decoded(piece), "shown_as": piece, "id": t,
            "logit_raw": record.logits[t], "model_prob": model[t], "logit_after_penalty": dist.after_penalty[t],
            "logit_after_temperature": dist.after_temperature[t], "logit_after_top_k": dist.after_top_k[t],
            "prob_before_top_p": st.before_top_p[i], "top_p_cumulative": st.top_p_cumulative[i],
            "logit_after_top_p": dist.after_top_p[t], "sampling_prob": dist.probs[t], "removed_by": str(st.removed_by[i]),
            "draw_start": st.draw_start[i], "draw_end": st.draw_end[i], "chosen": int(t == record.chosen),
        })  # fmt: skip
    return rows


WHY_COLUMNS = ("step", "position", "target", "versus", "part", "layer", "head", "value")


def why_rows(answer) -> list[dict]:
    """The Why view's split of one logit (an app.protocol.messages.AttributionResult), one row per part in
    the order the model adds them: the embedding (and GPT-2's position embedding), then per block
    each head, the attention output bias (where the model has one) and the MLP, then the final norm's
    shift and the LM head's bias, and last the ``logit`` they sum to. ``layer`` and ``head`` are empty
    where a part has none; ``versus`` is empty for a logit alone. Values as computed, already divided
    by the model's logit scaling."""
    a = answer.attribution
    common = dict(step=a.step, position=a.position, target=answer.target_piece,
                  versus=answer.versus_piece if a.versus >= 0 else "")

    def row(part, value, layer=math.nan, head=math.nan):
        return common | dict(part=part, layer=layer, head=head, value=value)

    rows = [row("embed", a.embed)] + ([row("pos_embed", a.pos_embed)] if a.has_pos_embed else [])
    for layer in range(len(a.mlp)):
        rows += [row("head", a.heads[layer, h], layer, h) for h in range(a.heads.shape[1])]
        if a.has_attn_bias:
            rows.append(row("attn_bias", a.attn_bias[layer], layer))
        rows.append(row("mlp", a.mlp[layer], layer))
    rows += [row("norm_shift", a.norm_shift)] if a.has_norm_shift else []
    rows += [row("head_bias", a.head_bias)] if a.has_head_bias else []
    return rows + [row("logit", a.logit)]


def history_rows(result) -> list[dict]:
    """One row per step: the token chosen, its sampling probability (what it was drawn from) and
    model probability (softmax of the raw logits), its rank (1 = highest raw logit), the entropy of
    both distributions (bits), the KV cache's length after the step
    (0 without the cache), the step's times (ms, to the microsecond) and its draw's u (empty when none was drawn).

    The probabilities are recomputed from each record's raw logits and settings with the engine's
    own ``engine.sampling.distribution`` (numpy only), so they equal what the window showed then."""
    trace = _trace(result)
    records = result.records
    prompt_len = len(result.prompt_ids)
    chosen_ids = [int(r.chosen) for r in records]
    context = np.concatenate([np.asarray(result.prompt_ids, dtype=np.int64), np.asarray(chosen_ids, dtype=np.int64)])
    pieces = _chosen_pieces(result)
    rows = []
    for i, (rec, piece) in enumerate(zip(records, pieces)):
        dist = distribution(rec.logits, context[: prompt_len + i], rec.settings)
        chosen = int(rec.chosen)
        model = softmax(rec.logits)
        rows.append({
            "step": rec.step, "token": decoded(piece), "shown_as": piece, "id": chosen, "chosen_by": rec.chosen_by,
            "sampling_prob": dist.probs[chosen], "model_prob": model[chosen],
            "rank": int((rec.logits > rec.logits[chosen]).sum()) + 1,
            "sampling_entropy_bits": dist.entropy_bits(), "model_entropy_bits": entropy_bits(model), "cache_len": rec.kv.positions, "forward_ms": round(rec.forward_ms, 3),
            "step_ms": round(rec.step_ms, 3), "draw_u": rec.draw_u, "settings": rec.settings.describe(),
        })  # fmt: skip
    return rows


def check(result) -> None:
    """TableError unless ``result`` has a history to export (what ``history_rows`` would refuse, at
    once: the window checks before it hands the work to a thread)."""
    _trace(result)
    _chosen_pieces(result)


def check_writable(path) -> None:
    """OSError, as writing ``path`` would raise it, unless a new file can be made in its folder and
    renamed over ``path`` (not a folder)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)


def generated_text(result) -> str:
    """The text of every token chosen so far, step 0 first (the bytes joined, then decoded)."""
    if result.trace is None:
        return ""
    return b"".join(piece_bytes(p) for p in _chosen_pieces(result)).decode("utf-8", "replace")


def text(result) -> str:
    """The prompt and the generated text, as plain text: what Copy text puts on the clipboard."""
    return result.prompt_text + generated_text(result)


def cell(value) -> str | int:
    """One value as CSV text: floats in their shortest exact form (a float32 reads back to the same
    float32), ``inf``/``-inf`` as such, NaN as an empty cell."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.float32):
        return "" if math.isnan(value) else str(value)  # numpy's shortest float32 repr: "0.12345679"
    if isinstance(value, (float, np.floating)):
        return "" if math.isnan(value) else repr(float(value))
    return str(value)


def write_csv(path, columns, rows) -> None:
    """Write ``rows`` (dicts) under a header of ``columns`` to ``path`` (replaced whole or not at all).
    OSError if it cannot be written."""
    with replacing(path, "w", newline="", encoding="utf-8-sig") as f:
        writer = csv.writer(f)  # quotes a cell holding a comma, a quote or a newline
        writer.writerow(columns)
        for row in rows:
            writer.writerow([cell(row[c]) for c in columns])


@contextmanager
def replacing(path, mode: str = "wb", **kw):
    """A new file next to ``path``, open in ``mode``; renamed over ``path`` when the block ends
    without an error (so a failed export leaves the old file whole), deleted otherwise. It gets the
    old file's permissions, or read for all and write for the owner (``mkstemp``'s are
    owner-only)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        with os.fdopen(fd, mode, **kw) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _chosen_pieces(result) -> list[str]:
    """The piece of every record's chosen token, step 0 first: the context's generated part, then
    the token chosen at the step shown (the newest record's)."""
    trace = result.trace
    pieces = list(trace.pieces[len(result.prompt_ids) :]) + [trace.chosen_piece]
    if len(pieces) != len(result.records) or trace.step != result.records[-1].step:
        raise TableError("The step shown is not the newest step of the history: nothing exported.")
    return pieces


def _trace(result):
    if result is None or result.trace is None:
        raise TableError("Nothing to export yet: step once (Space) first.")
    return result.trace

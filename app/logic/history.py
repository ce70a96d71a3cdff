"""The attention matrix of a whole history, assembled from per-step rows. Pure numpy, no Qt.

Each StepRecord holds only the attention rows its forward pass kept (``attn_rows``): one row per
decode step, every prompt row at a prefill of up to 256 positions, else a sample of 24 (every layer's
and head's P x P would grow with the square of the text). ``AttentionHistory`` keeps the records,
finds the record holding any query row, and keeps the full [T, T] matrix of the selected layer and
head up to date by writing only rows it has not written yet. The rows a sampled pass did not keep come
from the engine, one head at a time (``missing`` says which pass to ask for, ``add_map`` takes the
answer); until then they stay NaN. Records are matched by identity of their ``attn`` array, so a
branch or re-sample (same rows, new record) costs nothing and a rewind rewrites nothing.
"""

from __future__ import annotations

import bisect

import numpy as np

from engine.trace import shared_prefix


class AttentionHistory:
    """Attention rows of every step; ``matrix`` is float32 [T, T] with NaN above the diagonal."""

    def __init__(self):
        self._attn: list[np.ndarray] = []  # per record: float16 [L, H, r, end]
        self._rows: list[np.ndarray] = []  # per record: int64 [r], the query positions of its rows
        self._ns: list[int] = []  # per record: the positions its pass computed (n >= r)
        self._starts: list[int] = []
        self._map: tuple[np.ndarray, int, int, np.ndarray] | None = None  # (attn, layer, head, float16 [n, end]) from the engine
        self.length = 0  # T
        self.shape = (0, 0)  # (L, H)
        self._selected: tuple[int, int] | None = None
        self._buffer = np.full((0, 0), np.nan, np.float32)
        self._written = 0  # rows of _buffer valid for _selected
        self.fresh_from = 0  # the first row the last ``matrix`` call wrote; rows above it are unchanged

    def sync(self, records) -> None:
        """Follow ``records`` (a session's history): keep the common prefix, add the rest."""
        keep = shared_prefix(records, self._attn, "attn")
        del self._attn[keep:], self._rows[keep:], self._ns[keep:], self._starts[keep:]
        for rec in records[keep:]:
            self._attn.append(rec.attn)
            self._rows.append(np.asarray(rec.attn_rows))
            self._ns.append(int(rec.attn.shape[3]) - int(rec.start))
            self._starts.append(int(rec.start))
        if self._map is not None and not any(a is self._map[0] for a in self._attn):
            self._map = None  # its pass is no longer in the history
        if self._attn:
            self.shape = tuple(self._attn[0].shape[:2])
            self.length = int(self._starts[-1] + self._ns[-1])
        else:
            self.length = 0
        first_changed = self._starts[keep] if keep < len(self._starts) else self.length
        self._written = min(self._written, first_changed, self.length)

    def missing(self, layer: int, head: int) -> int | None:
        """The history step whose pass kept only a sample of its rows and whose rows of ``layer``,
        ``head`` the engine has not sent (ask it for them), or None."""
        for step, (attn, rows, n) in enumerate(zip(self._attn, self._rows, self._ns)):
            if len(rows) < n and not self._holds(attn, layer, head):
                return step
        return None

    def add_map(self, record, layer: int, head: int, rows: np.ndarray) -> bool:
        """Take the engine's ``rows`` (float16 [n, end]) of ``record``'s pass for ``layer``, ``head``;
        False (ignored) when that pass is no longer in the history."""
        if not any(a is record.attn for a in self._attn):
            return False
        self._map = (record.attn, int(layer), int(head), rows)
        if self._selected == (layer, head):
            self._written = min(self._written, int(record.start))  # rewrite its rows
        return True

    def _holds(self, attn: np.ndarray, layer: int, head: int) -> bool:
        return self._map is not None and self._map[0] is attn and self._map[1:3] == (layer, head)

    def row(self, pos: int) -> np.ndarray:
        """float16 [L, H, pos + 1]: where query position ``pos`` looked, every layer and head (in a
        sampled pass: the nearest row it kept at or before ``pos``, else its first)."""
        i = bisect.bisect_right(self._starts, pos) - 1
        kept = max(0, int(np.searchsorted(self._rows[i], pos, side="right")) - 1)
        return self._attn[i][:, :, kept, : pos + 1]

    def matrix(self, layer: int, head: int) -> np.ndarray:
        """float32 [T, T] for one layer and head (a view of an internal buffer; NaN = masked future).

        Rows from ``fresh_from`` on are the ones this call wrote: a step adds one, a rewind rewrites
        from the first changed row, another layer or head rewrites all.
        """
        T = self.length
        if self._selected != (layer, head):
            self._selected, self._written = (layer, head), 0
        self.fresh_from = min(self._written, T)
        if self._buffer.shape[0] < T:
            size = buffer_size(T)
            grown = np.full((size, size), np.nan, np.float32)
            grown[: self._written, : self._written] = self._buffer[: self._written, : self._written]
            self._buffer = grown
        if self._written < T:
            buf = self._buffer
            buf[self._written : T, :] = np.nan
            i = bisect.bisect_right(self._starts, self._written) - 1
            while i < len(self._attn) and self._starts[i] < T:
                start, attn, kept, n = self._starts[i], self._attn[i], self._rows[i], self._ns[i]
                end = attn.shape[3]
                lo = max(self._written, start)
                block = buf[lo : start + n, :end]
                if self._holds(attn, layer, head):  # every row, from the engine
                    block[...] = self._map[3][lo - start :]
                elif len(kept) == n:
                    block[...] = attn[layer, head, lo - start : n]  # [rows, end]
                else:  # a sample: its rows where it has them, NaN until the engine sends the rest
                    block[...] = np.nan
                    at = kept >= lo
                    buf[kept[at], :end] = attn[layer, head, at]
                if n > 1 or lo < start + n - 1:
                    r = np.arange(lo, start + n)[:, None]
                    block[np.arange(end)[None, :] > r] = np.nan  # the causal mask, not zero attention
                i += 1
            self._written = T
        return self._buffer[:T, :T]

    def thumbnails(self, size: int) -> np.ndarray:
        """float32 [L, H, size, size]: every head's matrix sampled on a size x size grid (NaN = masked)."""
        L, H = self.shape
        T = self.length
        out = np.full((L, H, size, size), np.nan, np.float32)
        if T == 0:
            return out
        idx = (np.arange(size) * T) // size  # nearest row / column for each thumbnail pixel
        for y, pos in enumerate(idx):
            row = self.row(int(pos))  # [L, H, pos + 1]
            cols = idx[idx <= pos]
            out[:, :, y, : len(cols)] = row[:, :, cols]
        return out


def buffer_size(T: int) -> int:
    """Rows (and columns) of a [T, T] buffer that grows in powers of two up to 4,096, then by 1,024
    (a power of two past 8,192 would be 16,384: 1 GiB of float32): a step rarely reallocates."""
    if T <= 4096:
        return max(64, 1 << (T - 1).bit_length())
    return (T + 1023) // 1024 * 1024


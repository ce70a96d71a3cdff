"""The attention matrix of a whole history, assembled from per-step rows. Pure numpy, no Qt.

Each StepRecord holds only the attention rows its forward pass computed (every prompt row at the
prefill, one row per decode step). ``AttentionHistory`` keeps the records, finds the record holding
any query row, and keeps the full [T, T] matrix of the selected layer and head up to date by
writing only rows it has not written yet. Records are matched by identity of their ``attn`` array,
so a branch or re-sample (same rows, new record) costs nothing and a rewind rewrites nothing.
"""

from __future__ import annotations

import bisect

import numpy as np

from engine.trace import shared_prefix


class AttentionHistory:
    """Attention rows of every step; ``matrix`` is float32 [T, T] with NaN above the diagonal."""

    def __init__(self):
        self._attn: list[np.ndarray] = []  # per record: float16 [L, H, n, end]
        self._starts: list[int] = []
        self.length = 0  # T
        self.shape = (0, 0)  # (L, H)
        self._selected: tuple[int, int] | None = None
        self._buffer = np.full((0, 0), np.nan, np.float32)
        self._written = 0  # rows of _buffer valid for _selected
        self.fresh_from = 0  # the first row the last ``matrix`` call wrote; rows above it are unchanged

    def sync(self, records) -> None:
        """Follow ``records`` (a session's history): keep the common prefix, add the rest."""
        keep = shared_prefix(records, self._attn, "attn")
        del self._attn[keep:], self._starts[keep:]
        for rec in records[keep:]:
            self._attn.append(rec.attn)
            self._starts.append(int(rec.start))
        if self._attn:
            self.shape = tuple(self._attn[0].shape[:2])
            self.length = int(self._starts[-1] + self._attn[-1].shape[2])
        else:
            self.length = 0
        first_changed = self._starts[keep] if keep < len(self._starts) else self.length
        self._written = min(self._written, first_changed, self.length)

    def row(self, pos: int) -> np.ndarray:
        """float16 [L, H, pos + 1]: where query position ``pos`` looked, every layer and head."""
        i = bisect.bisect_right(self._starts, pos) - 1
        attn = self._attn[i]
        return attn[:, :, pos - self._starts[i], : pos + 1]

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
                start, attn = self._starts[i], self._attn[i]
                n, end = attn.shape[2], attn.shape[3]
                lo = max(self._written, start)
                rows = attn[layer, head, lo - start : n]  # [rows, end]
                block = buf[lo : start + n, :end]
                block[...] = rows
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
    """Rows (and columns) of a [T, T] buffer that grows in powers of two: a step rarely reallocates."""
    return max(64, 1 << (T - 1).bit_length())

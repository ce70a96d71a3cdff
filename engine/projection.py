"""A fixed PCA basis for drawing embeddings and residual streams in 2-D or 3-D.

Fit once per model on the token embedding matrix, so the axes never move between steps: a point
moves only when its vector does. Deterministic: components come from ``eigh`` of the covariance
and each is signed so that its largest-magnitude loading is positive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Projection:
    """mean: float32 [d]; components: float32 [k, d] (rows are unit vectors, largest variance first);
    explained: float32 [k], the fraction of the embedding matrix's variance each component holds."""

    mean: np.ndarray
    components: np.ndarray
    explained: np.ndarray

    def project(self, vectors: np.ndarray, dims: int = 2) -> np.ndarray:
        """[..., d] -> [..., dims]; a stack ([L + 1, n, d]) one slice at a time, so that centring never
        copies a long prefill's whole residual stream."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim >= 3:
            return np.stack([self.project(v, dims) for v in vectors]) if len(vectors) else np.zeros((*vectors.shape[:-1], dims), np.float32)
        return ((vectors - self.mean) @ self.components[:dims].T).astype(np.float32)


FIT_CHUNK_ROWS = 4096  # rows converted to float64 at a time: 24 MB at d = 768


def fit(embedding: np.ndarray, k: int = 3) -> Projection:
    """PCA of ``embedding`` [V, d], top ``k`` components.

    The covariance is summed over chunks of rows in float64, so the fit never holds a float64
    copy of the whole matrix (two such copies were 620 MB for GPT-2 small): its extra memory is one
    chunk and a [d, d] matrix.
    """
    x = np.asarray(embedding)
    n, d = x.shape
    total = np.zeros(d, np.float64)
    for i in range(0, n, FIT_CHUNK_ROWS):
        total += x[i : i + FIT_CHUNK_ROWS].sum(axis=0, dtype=np.float64)
    mean = total / n
    cov = np.zeros((d, d), np.float64)
    for i in range(0, n, FIT_CHUNK_ROWS):
        chunk = x[i : i + FIT_CHUNK_ROWS].astype(np.float64) - mean  # [rows, d]
        cov += chunk.T @ chunk
    cov /= max(n - 1, 1)  # [d, d]
    values, vectors = np.linalg.eigh(cov)  # ascending
    order = np.argsort(values)[::-1][:k]
    return from_components(mean, vectors[:, order].T, values[order] / values.sum())


def from_components(mean: np.ndarray, components: np.ndarray, explained: np.ndarray) -> Projection:
    """The Projection of PCA ``components`` [k, d] (largest variance first), each signed so that its
    largest-magnitude loading is positive (the one sign rule, wherever the eigenvectors were computed)."""
    components = np.asarray(components, dtype=np.float64)
    signs = np.sign(components[np.arange(len(components)), np.argmax(np.abs(components), axis=1)])
    components = components * signs[:, None]
    return Projection(np.asarray(mean, np.float32), components.astype(np.float32), np.asarray(explained, np.float32))

"""Input checks of the attention study's simulator (no torch import, so that its command line rejects
bad input before loading torch)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["check_row_stochastic"]


def check_row_stochastic(A: Any, L: int | None = None, name: str = "A") -> np.ndarray:
    """Return ``A`` as an (L, L) float array, or raise ``ValueError`` naming ``name``.

    ``A`` may be given flat (``L²`` entries, row-major, as on the command line) or as a
    matrix. Row-stochastic means finite non-negative entries and rows summing to 1
    (tolerance 1e-8).
    """
    a = np.asarray(A, dtype=float)
    if a.ndim == 1:
        k = int(round(math.sqrt(a.size)))
        if k * k != a.size or k == 0:
            raise ValueError(f"{name} must have L*L entries (got {a.size})")
        a = a.reshape(k, k)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square L x L matrix (got shape {a.shape})")
    if L is not None and a.shape[0] != L:
        raise ValueError(f"{name} must be {L} x {L} (got {a.shape[0]} x {a.shape[1]})")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or not np.allclose(a.sum(axis=1), 1.0, atol=1e-8, rtol=0):
        raise ValueError(
            f"{name} must be row-stochastic (non-negative, rows summing to 1); got {a.tolist()}"
        )
    return a

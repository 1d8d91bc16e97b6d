"""Gauss-Hermite rules for the reference solver (numpy/scipy only, no ``replica``).

:func:`hermite` -- the ``n``-point Gauss rule for the standard normal weight (probabilists'),
any order: Golub-Welsch on the Jacobi matrix of the monic Hermite polynomials, weights from the
first eigenvector components (no factorials, so no overflow and no NaN weights at any order).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.linalg import eigh_tridiagonal


@lru_cache(maxsize=None)
def hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights (summing to 1) of the ``n``-point Gauss rule for ``N(0, 1)``."""
    if n < 1:
        raise ValueError("n must be >= 1")
    if n == 1:
        return np.zeros(1), np.ones(1)
    off = np.sqrt(np.arange(1, n, dtype=float))
    x, v = eigh_tridiagonal(np.zeros(n), off)
    w = v[0] ** 2
    w = w / w.sum()
    x = 0.5 * (x - x[::-1])            # exact symmetry
    w = 0.5 * (w + w[::-1])
    return x, w

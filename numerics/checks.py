"""Input checks shared by the data module and the CLI (no torch import, so the CLI can
reject bad input before loading torch)."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["INITS", "check_row_stochastic", "run_cli"]

#: Initialisations of the attention students (docs/explanation/theory.md §9).
INITS: tuple[str, ...] = ("semantic", "positional", "random")


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


def run_cli(parser: Any, run: Callable[[Any, str], int], argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and return ``run(args, prog)``, with SIGTERM raising like
    Ctrl-C inside (``replica.runtime.workers.terminate_raises``), so that every ``numerics`` command can
    end an interrupted run with one line and status 130/143. A missing optional package (torch,
    scikit-learn: :data:`numerics.deps.INSTALL`) ends it with one line saying what to install, status 2."""
    from replica.runtime.workers import terminate_raises

    from .deps import missing_line

    args = parser.parse_args(argv)
    with terminate_raises():
        return missing_line(parser.prog, run, args, parser.prog)

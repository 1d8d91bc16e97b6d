"""Constants of the seed paper's attention model (Cui et al. 2024), defined once.

Imported by the declarations in ``derivations/`` (defaults of their parameters), the
simulator (:mod:`numerics.applications.attention.targets`) and this application's figures. No sympy, no numerics.
"""
from __future__ import annotations

#: the paper's positional target matrix ``A`` (first example of its Fig. 2)
PAPER_A: tuple[tuple[float, float], tuple[float, float]] = ((0.6, 0.4), (0.4, 0.6))
#: the second positional matrix of its Appendix E.2 (Fig. 9)
SECOND_A: tuple[tuple[float, float], tuple[float, float]] = ((0.3, 0.7), (0.8, 0.2))
#: the paper's parameters at its Fig. 2 (positionality, token standard deviation, l2 strength)
OMEGA, SIGMA, LAM = 0.3, 0.5, 0.01

#: the attention study's branches: semantic learns the teacher's content (the positional
#: overlap m is pinned to 0), positional learns the positions (theta = 0), agnostic neither
BRANCHES: dict[str, tuple[str, ...]] = {"semantic": ("m",), "positional": ("theta",), "agnostic": ("m", "theta")}
#: (high, low): the semantic branch wins at large alpha, the positional one at small alpha
TRANSITION: tuple[str, str] = ("semantic", "positional")


def A_parameters(A) -> dict[str, float]:
    """``{"A_11": ..., "A_12": ..., ...}`` of an ``L x L`` matrix (nested sequence, row-major)."""
    return {f"A_{i + 1}{j + 1}": float(v) for i, row in enumerate(A) for j, v in enumerate(row)}

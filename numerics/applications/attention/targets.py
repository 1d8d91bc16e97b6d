"""The attention study's targets ``T(h*)`` (docs/explanation/theory.md §1): the paper's mixed target.

A target maps teacher fields ``h*`` of shape ``(n, L, r_t)`` to row-stochastic matrices ``T(h*)``
of shape ``(n, L, L)``; labels are ``y = T(h*) x`` (:class:`numerics.tokens.Teacher`).
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import torch

from replica.applications.attention.paper import PAPER_A  # the paper's A, defined once

from .validation import check_row_stochastic

__all__ = ["PAPER_A", "Target", "SemanticTarget", "PositionalTarget", "MixedTarget", "check_row_stochastic",
           "softmax_row_gram"]

ArrayLike = Union[float, Sequence[float], Sequence[Sequence[float]], np.ndarray]


def softmax_row_gram(h: torch.Tensor) -> torch.Tensor:
    """``softmax_row(h hᵀ)`` for a batch of fields ``h`` of shape (n, L, r) -> (n, L, L)."""
    return torch.softmax(h @ h.transpose(-1, -2), dim=-1)


class Target:
    """Base class of targets ``T(h*)``; subclasses implement :meth:`__call__`.

    Any plain callable with the same signature works wherever a target is expected;
    this class only documents the interface.
    """

    def __call__(self, hstar: torch.Tensor) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError


class SemanticTarget(Target):
    """Pure semantic target ``T(h*) = softmax_row(h* h*ᵀ)`` (the ω = 0 case)."""

    def __call__(self, hstar: torch.Tensor) -> torch.Tensor:
        return softmax_row_gram(hstar)

    def __repr__(self) -> str:
        return "SemanticTarget()"


class PositionalTarget(Target):
    """Pure positional target ``T(h*) = A`` (the ω = 1 case), ``A`` row-stochastic."""

    def __init__(self, A: ArrayLike = PAPER_A) -> None:
        self.A = check_row_stochastic(A)

    def __call__(self, hstar: torch.Tensor) -> torch.Tensor:
        A = torch.as_tensor(self.A, dtype=hstar.dtype, device=hstar.device)
        return A.expand(hstar.shape[0], *A.shape)

    def __repr__(self) -> str:
        return f"PositionalTarget(A={self.A.tolist()})"


class MixedTarget(Target):
    """The paper's target (its eq. 16): ``T(h*) = (1 − ω) softmax_row(h* h*ᵀ) + ω A``.

    ``ω ∈ [0, 1]`` is the positionality; ``A`` an L×L row-stochastic matrix (default
    :data:`PAPER_A`). ω = 0 and ω = 1 give :class:`SemanticTarget` and
    :class:`PositionalTarget`.
    """

    def __init__(self, omega: float, A: ArrayLike = PAPER_A) -> None:
        if not (0.0 <= float(omega) <= 1.0):
            raise ValueError(f"omega must be in [0, 1] (got {omega})")
        self.omega = float(omega)
        self.A = check_row_stochastic(A)

    @property
    def L(self) -> int:
        return self.A.shape[0]

    def __call__(self, hstar: torch.Tensor) -> torch.Tensor:
        A = torch.as_tensor(self.A, dtype=hstar.dtype, device=hstar.device)
        if self.omega == 0.0:
            return softmax_row_gram(hstar)
        if self.omega == 1.0:
            return A.expand(hstar.shape[0], *A.shape)
        return (1.0 - self.omega) * softmax_row_gram(hstar) + self.omega * A

    def __repr__(self) -> str:
        return f"MixedTarget(omega={self.omega}, A={self.A.tolist()})"

"""Student models (docs/explanation/theory.md §1 and §8). Every student maps sentences ``x`` (n, L, d) to
outputs ``f(x)`` (n, L, d), so one risk function (:func:`numerics.applications.attention.train.sample_losses`)
serves them all.

* :class:`TiedAttention`: ``h_ℓ = Qᵀ(x_ℓ + p_ℓ)/√d ∈ R^r``, ``S(h) = softmax_row(h hᵀ)``,
  ``f = S(h)(x + P)``.
* :class:`UntiedAttention`: ``W = [Q K]``, ``S = softmax_row(h^Q h^Kᵀ)``.
* :class:`LinearBaseline`: ``f_B(x) = B x`` with ``B ∈ R^{L×L}``, no positional encodings.

Attention students expose ``weights()`` (the matrix ``W ∈ R^{d×r_W}`` whose order
parameters the theory describes, ``W = Q`` tied, ``W = [Q K]`` untied) and
``sign_groups()`` (groups of columns of ``W`` whose joint sign flip leaves ``S``
unchanged), used by :mod:`numerics.metrics` to fix the reported signs.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from numerics.checks import INITS
from .targets import softmax_row_gram

__all__ = [
    "INITS",
    "AttentionStudent",
    "TiedAttention",
    "UntiedAttention",
    "LinearBaseline",
    "init_columns",
    "POSITIONAL_NOISE",
]

#: Scale of the iid noise put in the columns that a semantic/positional init leaves free
#: (rank r > r_t, resp. r > 1). Exactly-zero columns would be a stationary subspace of GD
#: (the gradient wrt column j of ``h hᵀ`` is ∝ column j), so they get a small kick.
POSITIONAL_NOISE: float = 1e-2
#: Scale of the random initialisation ``0.1·N(0, 1)``.
RANDOM_SCALE: float = 0.1


def init_columns(
    kind: str,
    d: int,
    r: int,
    Qstar: np.ndarray,
    P: np.ndarray,
    rng: np.random.Generator,
    noise: float = POSITIONAL_NOISE,
) -> np.ndarray:
    """Initial ``Q ∈ R^{d×r}`` for one weight matrix (docs/explanation/theory.md §9).

    * ``semantic``: ``Q = Q*`` (informed). If ``r > r_t`` the extra columns are
      ``noise·N(0,1)``; if ``r < r_t`` the first ``r`` teacher columns are used.
    * ``positional``: column 1 is ``p_1/‖p_1‖`` (``= 1_d/√d`` for the default encodings),
      the others ``noise·N(0,1)``.
    * ``random``: ``0.1·N(0, 1)`` entries.
    """
    if kind not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {kind!r})")
    if kind == "random":
        return RANDOM_SCALE * rng.standard_normal((d, r))
    Q = noise * rng.standard_normal((d, r))
    if kind == "semantic":
        k = min(r, Qstar.shape[1])
        Q[:, :k] = Qstar[:, :k]
    else:
        Q[:, 0] = P[0] / np.linalg.norm(P[0])
    return Q


def _as_f64(a: np.ndarray | torch.Tensor | Sequence[Sequence[float]]) -> torch.Tensor:
    """A fresh float64 CPU tensor copy of ``a`` (array, nested list or tensor)."""
    if isinstance(a, torch.Tensor):
        return a.detach().to(device="cpu", dtype=torch.float64).clone()
    return torch.tensor(np.array(a, dtype=float))


class AttentionStudent(nn.Module):
    """Common part of the attention students: encodings, fields and output ``S(h)(x + P)``."""

    def __init__(self, P: np.ndarray | torch.Tensor) -> None:
        super().__init__()
        P_t = _as_f64(P)
        self.register_buffer("P", P_t)
        self.L, self.d = P_t.shape

    def encoded(self, x: torch.Tensor) -> torch.Tensor:
        """``x + P`` (the student, unlike the teacher, sees the positional encodings)."""
        return x + self.P.to(x.dtype)

    def attention_encoded(self, xp: torch.Tensor) -> torch.Tensor:
        """Attention matrices ``S(h)`` from the encoded sentences ``xp = x + P``, (n, L, L)."""
        raise NotImplementedError

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """Attention matrices ``S(h)``, shape (n, L, L)."""
        return self.attention_encoded(self.encoded(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Output ``f(x) = S(h)(x + P)``, shape (n, L, d)."""
        xp = self.encoded(x)
        return self.attention_encoded(xp) @ xp

    def weights(self) -> torch.Tensor:
        """The weight matrix ``W ∈ R^{d×r_W}`` of the theory's order parameters."""
        raise NotImplementedError

    def sign_groups(self) -> list[list[int]]:
        """Column groups of :meth:`weights` whose joint sign flip leaves ``S`` invariant."""
        raise NotImplementedError


class TiedAttention(AttentionStudent):
    """Tied dot-product attention of rank ``r`` (the paper's eq. 15 for r = 1):
    ``h_ℓ = Qᵀ(x_ℓ + p_ℓ)/√d``, ``S(h) = softmax_row(h hᵀ)``."""

    def __init__(self, Q0: np.ndarray | torch.Tensor, P: np.ndarray | torch.Tensor) -> None:
        super().__init__(P)
        Q0 = _as_f64(Q0)
        if Q0.ndim != 2 or Q0.shape[0] != self.d:
            raise ValueError(f"Q must have shape (d, r) with d={self.d} (got {tuple(Q0.shape)})")
        self.Q = nn.Parameter(Q0)

    @property
    def r(self) -> int:
        return self.Q.shape[1]

    def fields(self, x: torch.Tensor) -> torch.Tensor:
        """Student fields ``h = (x + P) Q/√d``, shape (n, L, r)."""
        return self.encoded(x) @ self.Q / math.sqrt(self.d)

    def attention_encoded(self, xp: torch.Tensor) -> torch.Tensor:
        return softmax_row_gram(xp @ self.Q / math.sqrt(self.d))

    def weights(self) -> torch.Tensor:
        return self.Q

    def sign_groups(self) -> list[list[int]]:
        # softmax(h hᵀ) is invariant under h -> h O for any orthogonal O; the column sign
        # flips are the part of that symmetry that a per-column convention can remove.
        return [[j] for j in range(self.r)]


class UntiedAttention(AttentionStudent):
    """Untied key/query attention (docs/explanation/theory.md §8): ``W = [Q K]``, ``h^Q = (x+P)Q/√d``,
    ``h^K = (x+P)K/√d``, ``S = softmax_row(h^Q h^Kᵀ)``."""

    def __init__(
        self,
        Q0: np.ndarray | torch.Tensor,
        K0: np.ndarray | torch.Tensor,
        P: np.ndarray | torch.Tensor,
    ) -> None:
        super().__init__(P)
        Q0 = _as_f64(Q0)
        K0 = _as_f64(K0)
        if Q0.shape != K0.shape or Q0.ndim != 2 or Q0.shape[0] != self.d:
            raise ValueError(
                f"Q and K must both have shape (d, r), d={self.d} "
                f"(got {tuple(Q0.shape)} and {tuple(K0.shape)})"
            )
        self.Q = nn.Parameter(Q0)
        self.K = nn.Parameter(K0)

    @property
    def r(self) -> int:
        return self.Q.shape[1]

    def fields(self, x: torch.Tensor) -> torch.Tensor:
        """Fields ``h = (x + P) W/√d = (h^Q, h^K)``, shape (n, L, 2r)."""
        return self.encoded(x) @ self.weights() / math.sqrt(self.d)

    def attention_encoded(self, xp: torch.Tensor) -> torch.Tensor:
        h = xp @ self.weights() / math.sqrt(self.d)
        hq, hk = h[..., : self.r], h[..., self.r :]
        return torch.softmax(hq @ hk.transpose(-1, -2), dim=-1)

    def weights(self) -> torch.Tensor:
        return torch.cat([self.Q, self.K], dim=1)

    def sign_groups(self) -> list[list[int]]:
        # h^Q h^Kᵀ is invariant only under flipping query column j and key column j together.
        return [[j, self.r + j] for j in range(self.r)]


class LinearBaseline(nn.Module):
    """Linear positional baseline (paper Result 5.1): ``f_B(x) = B x``, ``B ∈ R^{L×L}``,
    applied to ``x`` without positional encodings."""

    def __init__(self, B0: np.ndarray | torch.Tensor | Sequence[Sequence[float]]) -> None:
        super().__init__()
        B0 = _as_f64(B0)
        if B0.ndim != 2 or B0.shape[0] != B0.shape[1]:
            raise ValueError(f"B must be square L x L (got {tuple(B0.shape)})")
        self.B = nn.Parameter(B0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Output ``f_B(x) = B x``, shape (n, L, d)."""
        return self.B.to(x.dtype) @ x

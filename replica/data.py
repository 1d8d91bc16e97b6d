"""Per-token data statistics: the joint spectral law ``nu`` of THEORY §2.

Under Assumption 4.1 the token covariances ``Sigma_l`` share eigenvectors ``e_i``
with eigenvalues ``gamma_{l,i}``; the positional encodings project as
``pi_{l,i} = sqrt(d) e_i^T p_l`` and the teacher as ``tau_i = Q*^T e_i``. As
``d -> infinity`` the triples ``(gamma_i, pi_i, tau_i)`` have a joint law ``nu``.
We represent ``nu`` by finitely many weighted atoms ``(gamma, pi)`` with
``tau ~ N(0, I_{r_t})`` independent of them (an iid Gaussian teacher, as in the
paper). Then ``rho_bar_l = E[gamma_l]`` and ``rho_l = E[gamma_l] I_{r_t}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import sympy as sp

from .errors import DeclarationError


@dataclass(frozen=True)
class SpectralAtom:
    """One atom of ``nu``: probability ``weight``, eigenvalues ``gamma_l`` and projections ``pi_l``."""

    weight: sp.Expr
    gamma: tuple[sp.Expr, ...]
    pi: tuple[sp.Expr, ...]


@dataclass(frozen=True)
class SecondMomentGroup:
    """Atoms sharing one eigenvalue vector ``gamma``, summarised by what the l2 potential needs.

    ``weight = sum_k w_k`` and ``pi_moment[l, k] = sum_atoms w pi_l pi_k`` (an ``L x L`` matrix).
    """

    weight: sp.Expr
    gamma: tuple[sp.Expr, ...]
    pi_moment: sp.Matrix


class TokenStatistics:
    """The joint law of token eigenvalues and positional projections (plus an iid teacher)."""

    def __init__(self, atoms: Sequence[SpectralAtom]):
        if not atoms:
            raise DeclarationError("data: the spectral law needs at least one atom")
        L = len(atoms[0].gamma)
        for a in atoms:
            if len(a.gamma) != L or len(a.pi) != L:
                raise DeclarationError(
                    "data: every atom needs one eigenvalue gamma_l and one projection pi_l per token "
                    f"(L={L}), got {len(a.gamma)} and {len(a.pi)}")
            for g in a.gamma:
                g = sp.sympify(g)
                if g.is_number and g < 0:
                    raise DeclarationError(
                        f"data: covariance eigenvalue gamma={g} < 0 (token covariances must be PSD)")
            w = sp.sympify(a.weight)
            if w.is_number and w < 0:
                raise DeclarationError(f"data: atom weight {w} < 0")
        total = sp.nsimplify(sum(sp.sympify(a.weight) for a in atoms))
        if total.is_number and abs(float(total) - 1.0) > 1e-9:
            raise DeclarationError(f"data: atom weights must sum to 1, got {float(total)}")
        self.atoms = list(atoms)
        self.L = L

    # ------------------------------------------------------------ constructors
    @classmethod
    def isotropic(cls, L: int, variance: sp.Expr, positional: Sequence[sp.Expr] | None = None
                  ) -> "TokenStatistics":
        """``Sigma_l = variance * I`` for every token, ``p_l`` with projections ``pi_l``.

        ``positional`` gives ``pi_l`` (default: none, all zeros). The paper's
        ``p_1 = -p_2 = 1_d / sqrt(d)`` is ``positional=(1, -1)``: in the standard basis
        (an eigenbasis of an isotropic covariance) every coordinate has ``pi = +-1``.
        """
        if L < 1:
            raise DeclarationError(f"data: L must be >= 1, got {L}")
        pis = tuple(sp.sympify(p) for p in (positional if positional is not None else [0] * L))
        if len(pis) != L:
            raise DeclarationError(f"data: positional needs L={L} projections, got {len(pis)}")
        var = sp.sympify(variance)
        return cls([SpectralAtom(sp.Integer(1), tuple([var] * L), pis)])

    @classmethod
    def from_covariances(cls, covariances: Sequence[np.ndarray], positional: np.ndarray | None = None,
                         decimals: int = 10) -> "TokenStatistics":
        """Empirical law from concrete finite-``d`` covariances and encodings.

        ``covariances[l]`` is a symmetric PSD ``d x d`` matrix, or a length-``d`` vector
        of variances (diagonal covariance). All must commute (Assumption 4.1).
        ``positional`` is ``L x d`` (rows ``p_l``). Eigen-directions with equal
        ``(gamma, pi)`` (to ``decimals``) are merged into one atom.
        """
        mats = []
        for l, S in enumerate(covariances):
            S = np.asarray(S, dtype=float)
            if S.ndim == 1:
                S = np.diag(S)
            if S.ndim != 2 or S.shape[0] != S.shape[1]:
                raise DeclarationError(f"data: covariance of token {l + 1} must be square, got shape {S.shape}")
            if not np.allclose(S, S.T, atol=1e-12 * max(1.0, np.abs(S).max())):
                raise DeclarationError(f"data: covariance of token {l + 1} is not symmetric")
            mats.append(S)
        L = len(mats)
        if L == 0:
            raise DeclarationError("data: need at least one token covariance")
        d = mats[0].shape[0]
        if any(S.shape != (d, d) for S in mats):
            raise DeclarationError("data: all token covariances must have the same dimension d")
        for l, S in enumerate(mats):
            if np.linalg.eigvalsh(S).min() < -1e-10 * max(1.0, np.abs(S).max()):
                raise DeclarationError(f"data: covariance of token {l + 1} is not positive semi-definite")
        for a in range(L):
            for b in range(a + 1, L):
                C = mats[a] @ mats[b] - mats[b] @ mats[a]
                if np.abs(C).max() > 1e-8 * max(1.0, np.abs(mats[a]).max() * np.abs(mats[b]).max()):
                    raise DeclarationError(
                        f"data: covariances of tokens {a + 1} and {b + 1} do not commute (Assumption 4.1)")
        P = np.zeros((L, d)) if positional is None else np.asarray(positional, dtype=float)
        if P.shape != (L, d):
            raise DeclarationError(f"data: positional encodings must have shape (L, d)=({L}, {d}), got {P.shape}")
        # A generic combination of commuting symmetric matrices has their common eigenvectors.
        rng = np.random.default_rng(0)
        combo = sum(c * S for c, S in zip(rng.uniform(1, 2, L), mats))
        _, E = np.linalg.eigh(combo)
        gam = np.stack([np.einsum("ij,ik,kj->j", E, S, E) for S in mats], axis=1)  # (d, L)
        pis = np.sqrt(d) * (P @ E).T  # (d, L)
        keys: dict[tuple, float] = {}
        for i in range(d):
            key = tuple(np.round(gam[i], decimals)) + tuple(np.round(pis[i], decimals))
            keys[key] = keys.get(key, 0.0) + 1.0 / d
        atoms = [SpectralAtom(sp.Float(w), tuple(sp.Float(x) for x in k[:L]), tuple(sp.Float(x) for x in k[L:]))
                 for k, w in keys.items()]
        return cls(atoms)

    # ---------------------------------------------------------------- moments
    def rho_bar(self, l: int) -> sp.Expr:
        """``rho_bar_l = tr Sigma_l / d = E_nu[gamma_l]`` (0-based token index)."""
        return sp.Add(*[a.weight * a.gamma[l] for a in self.atoms])

    def rho(self, l: int, r_t: int) -> sp.Matrix:
        """``rho_l = Q*^T Sigma_l Q* / d = E_nu[gamma_l] I_{r_t}`` for the iid Gaussian teacher."""
        return self.rho_bar(l) * sp.eye(r_t)

    def second_moment_groups(self) -> list[SecondMomentGroup]:
        """Atoms grouped by their eigenvalue vector (all an l2 entropic potential needs)."""
        groups: dict[tuple, list[SpectralAtom]] = {}
        for a in self.atoms:
            groups.setdefault(tuple(sp.sympify(g) for g in a.gamma), []).append(a)
        out = []
        for gamma, atoms in groups.items():
            w = sp.Add(*[a.weight for a in atoms])
            M = sp.zeros(self.L, self.L)
            for a in atoms:
                pi = sp.Matrix(a.pi)
                M += a.weight * pi * pi.T
            out.append(SecondMomentGroup(w, gamma, M))
        return out

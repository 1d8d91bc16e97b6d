"""Per-token data statistics: the joint spectral law ``nu`` of docs/explanation/theory.md §2.

Under Assumption 4.1 the token covariances ``Sigma_l`` share eigenvectors ``e_i``
with eigenvalues ``gamma_{l,i}``; the positional encodings project as
``pi_{l,i} = sqrt(d) e_i^T p_l`` and the teacher as ``tau_i = Q*^T e_i``. As
``d -> infinity`` the triples ``(gamma_i, pi_i, tau_i)`` have a joint law ``nu``.
We represent ``nu`` by finitely many weighted atoms ``(gamma, pi)`` with
``tau ~ N(0, I_{r_t})`` independent of them (an iid Gaussian teacher, as in the
paper). Then ``rho_bar_l = E[gamma_l]`` and ``rho_l = E[gamma_l] I_{r_t}``.

Token clusters (paper Appendix C.10, docs/explanation/theory.md §8): token ``l`` may be drawn from a Gaussian
mixture, ``x_l | c_l = c ~ N(mu_{lc}, Sigma_{lc})``, the labels ``(c_1, ..., c_L)`` having a
joint law ``P``. The statistics are then indexed by *slots* ``s = (l, c)``: every atom
carries one eigenvalue ``gamma_s`` and one projection ``pi_s = sqrt(d) e_i^T (mu_s + p_l)`` per
slot, and :class:`TokenStatistics` also holds the label law. Without clusters the slots are
the tokens and nothing changes. A token's statistic under a label configuration is written
``sum_c e_{lc} x_{lc}`` with one-hot indicator symbols ``e_{lc}`` (:attr:`TokenStatistics.label_symbols`),
which the energetic average sets to each configuration in turn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np
import sympy as sp

from .constraints import Constraint
from ..errors import DeclarationError
from .factors import Factor, numeric
from .symbols import symbol

#: cluster letters of the slot labels ("1a", "1b", ...)
CLUSTER_LETTERS = "abcdefghijklmnopqrstuvwxyz"


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


class TokenStatistics(Factor):
    """The joint law of token eigenvalues and positional projections (plus an iid teacher).

    ``clusters`` (optional) gives the number of mixture components ``K_l`` of every token;
    the atoms then carry one ``gamma`` and one ``pi`` per *slot* ``(l, c)``, slots ordered
    token-major (``1a, 1b, 2a, ...``), and ``labels`` is the joint law of the cluster
    labels: ``{(c_1, ..., c_L): probability}`` (0-based cluster indices; sympy expressions
    of the model parameters allowed; configurations not listed have probability 0).

    A factor (role ``data law``, :mod:`replica.symbolic.factors`): the potentials read its moments
    (:meth:`rho_bar`, :meth:`rho`, :meth:`second_moment_groups`); the simulator draws from it at
    dimension ``d`` (:meth:`coordinates`, :meth:`sample_slots`, :meth:`sample_tokens`).
    """

    role = "data law"

    def __init__(self, atoms: Sequence[SpectralAtom], clusters: Sequence[int] | None = None,
                 labels: Mapping[tuple, sp.Expr] | None = None):
        if not atoms:
            raise DeclarationError("data: the spectral law needs at least one atom")
        if clusters is None:
            if labels is not None:
                raise DeclarationError("data: a label law needs clusters (the number of components per token)")
            L = len(atoms[0].gamma)
            clusters = (1,) * L
        clusters = tuple(int(k) for k in clusters)
        if not clusters or any(k < 1 for k in clusters):
            raise DeclarationError(f"data: clusters must give K_l >= 1 per token, got {clusters}")
        L = len(clusters)
        S = sum(clusters)
        per = f"per slot (S={S} slots (token, cluster))" if S > L else f"per token (L={L})"
        for a in atoms:
            if len(a.gamma) != S or len(a.pi) != S:
                raise DeclarationError(
                    f"data: every atom needs one eigenvalue gamma and one projection pi {per}, "
                    f"got {len(a.gamma)} and {len(a.pi)}")
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
        self.clusters = clusters
        self.S = S
        self.has_clusters = S > L
        #: (token, cluster) of every slot, 0-based, token-major
        self.slots: list[tuple[int, int]] = [(l, c) for l in range(L) for c in range(clusters[l])]
        self.labels: dict[tuple[int, ...], sp.Expr] | None = None
        if self.has_clusters:
            self.labels = self._check_labels(labels)
        elif labels is not None and any(tuple(k) != (0,) * L for k in labels):
            raise DeclarationError("data: label configurations name clusters that do not exist")

    def _check_labels(self, labels: Mapping[tuple, sp.Expr] | None) -> dict[tuple[int, ...], sp.Expr]:
        if not labels:
            raise DeclarationError("data: token clusters need a joint label law "
                                   "labels={(c_1, ..., c_L): probability, ...}")
        out: dict[tuple[int, ...], sp.Expr] = {}
        for config, prob in labels.items():
            config = tuple(int(c) for c in config)
            if len(config) != self.L:
                raise DeclarationError(f"data: label configuration {config} needs one cluster per token "
                                       f"(L={self.L})")
            for l, c in enumerate(config):
                if not 0 <= c < self.clusters[l]:
                    raise DeclarationError(f"data: label configuration {config}: token {l + 1} has clusters "
                                           f"0..{self.clusters[l] - 1}")
            if config in out:
                raise DeclarationError(f"data: label configuration {config} given twice")
            prob = sp.sympify(prob)
            if prob.is_number and float(prob) < 0:
                raise DeclarationError(f"data: label probability P{config} = {float(prob)} < 0")
            out[config] = prob
        total = sp.nsimplify(sp.Add(*out.values()))
        if total.is_number and abs(float(total) - 1.0) > 1e-9:
            raise DeclarationError(f"data: label probabilities must sum to 1, got {float(total)}")
        return out

    # ------------------------------------------------------------ slots and labels
    def slot_label(self, s: int) -> str:
        """``"1"``, ``"2"`` ... without clusters; ``"1a"``, ``"1b"``, ``"2a"`` ... with (0-based ``s``)."""
        l, c = self.slots[s]
        return f"{l + 1}{CLUSTER_LETTERS[c]}" if self.has_clusters else f"{l + 1}"

    @property
    def slot_labels(self) -> tuple[str, ...]:
        """Labels of the order-parameter slots: tokens ``1, 2, ...``, or ``(token, cluster)``
        pairs like ``1a`` with clusters."""
        return tuple(self.slot_label(s) for s in range(self.S))

    def token_slots(self, l: int) -> list[int]:
        """The slots of token ``l`` (0-based), one per cluster."""
        return [s for s, (t, _) in enumerate(self.slots) if t == l]

    @cached_property
    def _indicators(self) -> dict[int, sp.Symbol]:
        out = {}
        for s, (l, c) in enumerate(self.slots):
            if self.clusters[l] > 1:
                lab = self.slot_label(s)
                out[s] = symbol(f"e_{lab}", rf"e_{{{lab}}}")
        return out

    @property
    def label_symbols(self) -> list[sp.Symbol]:
        """One-hot label indicators ``e_{lc}`` for every slot of a token with ``K_l > 1``."""
        return list(self._indicators.values())

    def _indicator(self, s: int) -> sp.Expr:
        return self._indicators.get(s, sp.Integer(1))

    def token_combination(self, l: int, values: Sequence) -> object:
        """``sum_c e_{lc} values[c]`` over the slots of token ``l`` (``values[0]`` if ``K_l = 1``).

        ``values`` are sympy expressions or matrices, one per cluster of token ``l``. At a
        label configuration (one-hot ``e``) this is the value of the token's cluster.
        """
        slots = self.token_slots(l)
        if len(values) != len(slots):
            raise ValueError(f"token {l + 1} has {len(slots)} clusters, got {len(values)} values")
        if len(slots) == 1:
            return values[0]
        out = self._indicator(slots[0]) * values[0]
        for s, v in zip(slots[1:], values[1:]):
            out = out + self._indicator(s) * v
        return out

    def configurations(self) -> list[tuple[tuple[int, ...], sp.Expr, tuple[int, ...]]]:
        """``(labels, probability, one-hot values of label_symbols)`` of every configuration."""
        if not self.has_clusters:
            return [((0,) * self.L, sp.Integer(1), ())]
        out = []
        for config, prob in self.labels.items():
            onehot = tuple(int(config[l] == c) for (l, c) in self.slots if self.clusters[l] > 1)
            out.append((config, prob, onehot))
        return out

    def marginal(self, s: int) -> sp.Expr:
        """``P(c_l = c)`` of slot ``s = (l, c)``."""
        if not self.has_clusters:
            return sp.Integer(1)
        l, c = self.slots[s]
        return sp.Add(*[p for config, p in self.labels.items() if config[l] == c])

    def label_constraints(self) -> list:
        """Constraints on the parameters making the label law a probability law (none if numeric)."""
        if not self.has_clusters:
            return []
        out = []
        total = sp.Add(*self.labels.values())
        if total.free_symbols:
            out.append(Constraint("labels", "label probabilities must sum to 1", sp.Eq(total, 1)))
        for config, p in self.labels.items():
            if p.free_symbols:
                out.append(Constraint("labels", f"label probability P{config} must be >= 0", sp.Ge(p, 0)))
        return out

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
    def mixture(cls, variances: Sequence[Sequence[sp.Expr]], labels: Mapping[tuple, sp.Expr],
                positional: Sequence[sp.Expr] | None = None,
                means: Sequence[Sequence[sp.Expr]] | None = None) -> "TokenStatistics":
        """Gaussian-mixture tokens with isotropic components (paper Appendix C.10).

        ``variances[l][c]``: ``Sigma_{lc} = variances[l][c] I``; ``labels``: the joint law of
        the cluster labels ``{(c_1, ..., c_L): probability}``; ``positional``: ``pi_l`` as in
        :meth:`isotropic` (``p_l`` with entries ``pi_l / sqrt(d)``); ``means[l][c]``: the
        amplitude ``a_{lc}`` of the cluster mean ``mu_{lc} = a_{lc} u`` along one unit direction
        ``u`` orthogonal to the encodings with entries ``+-1/sqrt(d)``, half of each sign (e.g.
        an alternating sign pattern; ``numerics.applications.attention.clusters`` uses the same). In the standard
        basis the law has two atoms of weight 1/2 with ``pi_{lc} = pi_l + a_{lc}`` and
        ``pi_l - a_{lc}``; one atom if every amplitude is 0.
        """
        L = len(variances)
        if L < 1:
            raise DeclarationError("data: need at least one token")
        clusters = tuple(len(v) for v in variances)
        pis = tuple(sp.sympify(p) for p in (positional if positional is not None else [0] * L))
        if len(pis) != L:
            raise DeclarationError(f"data: positional needs L={L} projections, got {len(pis)}")
        if means is None:
            means = [[0] * k for k in clusters]
        if len(means) != L or any(len(a) != k for a, k in zip(means, clusters)):
            raise DeclarationError("data: means need one amplitude per token and cluster, like variances")
        gam = tuple(sp.sympify(v) for row in variances for v in row)
        amp = [sp.sympify(a) for row in means for a in row]
        base = [pis[l] for l, k in enumerate(clusters) for _ in range(k)]
        if all(a == 0 for a in amp):
            atoms = [SpectralAtom(sp.Integer(1), gam, tuple(base))]
        else:
            half = sp.Rational(1, 2)
            atoms = [SpectralAtom(half, gam, tuple(b + a for b, a in zip(base, amp))),
                     SpectralAtom(half, gam, tuple(b - a for b, a in zip(base, amp)))]
        return cls(atoms, clusters=clusters, labels=labels)

    @classmethod
    def from_covariances(cls, covariances: Sequence[np.ndarray], positional: np.ndarray | None = None,
                         decimals: int = 10) -> "TokenStatistics":
        """Empirical law from concrete finite-``d`` covariances and encodings.

        ``covariances[l]`` is a symmetric PSD ``d x d`` matrix, or a length-``d`` vector
        of variances (diagonal covariance). All must commute (Assumption 4.1).
        ``positional`` is ``L x d`` (rows ``p_l``). Eigen-directions with equal
        ``(gamma, pi)`` (to ``decimals``) are merged into one atom.
        """
        return cls(_empirical_atoms(covariances, positional, decimals, "token"))

    @classmethod
    def from_mixture(cls, covariances: Sequence[Sequence[np.ndarray]], labels: Mapping[tuple, float],
                     means: Sequence[Sequence[np.ndarray]] | None = None, positional: np.ndarray | None = None,
                     decimals: int = 10) -> "TokenStatistics":
        """Empirical law of finite-``d`` Gaussian-mixture tokens (paper Assumption C.1).

        ``covariances[l][c]`` (``d x d`` or a vector of variances) and ``means[l][c]``
        (length ``d``, default 0) of cluster ``c`` of token ``l``; ``positional`` ``L x d``;
        ``labels`` the joint label law. All covariances must commute; the projections are
        ``pi_{lc} = sqrt(d) e_i^T (mu_{lc} + p_l)``.
        """
        L = len(covariances)
        clusters = tuple(len(c) for c in covariances)
        flat = [S for row in covariances for S in row]
        if not flat:
            raise DeclarationError("data: need at least one token covariance")
        d = np.asarray(flat[0]).shape[0]
        P = np.zeros((L, d)) if positional is None else np.asarray(positional, dtype=float)
        if P.shape != (L, d):
            raise DeclarationError(f"data: positional encodings must have shape (L, d)=({L}, {d}), got {P.shape}")
        rows = []
        for l in range(L):
            for c in range(clusters[l]):
                mu = np.zeros(d) if means is None else np.asarray(means[l][c], dtype=float)
                if mu.shape != (d,):
                    raise DeclarationError(f"data: mean of token {l + 1}, cluster {c + 1} must have length d={d}")
                rows.append(mu + P[l])
        return cls(_empirical_atoms(flat, np.array(rows), decimals, "slot"), clusters=clusters, labels=labels)

    def parameters(self) -> set[sp.Symbol]:
        """The parameters of the law: the symbols of its atoms' weights, eigenvalues and projections and
        of its label law."""
        exprs = [e for a in self.atoms for e in (a.weight, *a.gamma, *a.pi)] + list((self.labels or {}).values())
        return set().union(*[sp.sympify(e).free_symbols for e in exprs])

    # ---------------------------------------------------------------- at finite size
    def latex(self) -> str:
        """The law as LaTeX: its atoms ``(weight, gamma, pi)`` per slot."""
        atoms = " + ".join(rf"{sp.latex(a.weight)}\,\delta_{{(\gamma, \pi) = ({sp.latex(sp.Matrix(a.gamma).T)}, "
                           rf"{sp.latex(sp.Matrix(a.pi).T)})}}" for a in self.atoms)
        return rf"\nu = {atoms}"

    def numeric_atoms(self, values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The atoms at parameter ``values`` (by name): weights ``(atoms,)``, eigenvalues and projections
        ``(atoms, slots)``."""
        def num(e):
            return numeric(e, values, "data")

        return (np.array([num(a.weight) for a in self.atoms]),
                np.array([[num(g) for g in a.gamma] for a in self.atoms]),
                np.array([[num(p) for p in a.pi] for a in self.atoms]))

    def coordinates(self, d: int, values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(gamma, P)``, each ``(slots, d)``: the atoms' eigenvalues and projections (encoding plus
        cluster mean, entries ``pi / sqrt(d)``) spread over ``d`` coordinates in proportion to the
        atoms' weights (largest remainders), the diagonal covariances and encodings of a draw at ``d``."""
        weights, gamma, pi = self.numeric_atoms(values)
        w = weights / weights.sum()
        raw = w * d
        counts = np.floor(raw).astype(int)
        for k in np.argsort(-(raw - counts))[: d - counts.sum()]:
            counts[k] += 1
        idx = np.repeat(np.arange(len(w)), counts)
        return gamma[idx].T.copy(), pi[idx].T / math.sqrt(d)

    def configuration_table(self, values: Mapping[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every label configuration as the slots of its tokens ``(configurations, L)`` and its
        probability (normalised), at parameter ``values``."""
        confs = self.configurations()
        slots = np.array([[self.slots.index((l, c)) for l, c in enumerate(cfg)] for cfg, _, _ in confs])
        probs = np.array([numeric(pr, values, "data: labels") for _, pr, _ in confs])
        return slots, probs / probs.sum()

    def sample_slots(self, n: int, rng: np.random.Generator, values: Mapping[str, float] | None = None
                     ) -> np.ndarray:
        """The slot of every token of ``n`` samples ``(n, L)``: the label configuration drawn from the
        label law with token clusters (one draw of ``rng``), the tokens themselves without (no draw)."""
        if not self.label_symbols:
            return np.broadcast_to(np.arange(self.L), (n, self.L))
        slots, probs = self.configuration_table(values)
        return slots[rng.choice(len(slots), n, p=probs)]

    def sample_tokens(self, gamma: np.ndarray, slot: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Tokens ``x_l ~ N(0, diag(gamma_s))`` of slot ``s = slot[mu, l]``, ``(n, L, d)`` (one draw of
        ``rng``; the encodings and cluster means are added by whoever reads the tokens)."""
        n, d = slot.shape[0], gamma.shape[1]
        return rng.standard_normal((n, self.L, d)) * np.sqrt(gamma)[slot]

    def label_columns(self, slot: np.ndarray) -> list[np.ndarray]:
        """The one-hot label indicators ``e_{lc}`` (:attr:`label_symbols`) of samples whose tokens sit in
        the slots ``slot`` ``(n, L)``."""
        return [(slot[:, self.slots[s][0]] == s).astype(float) for s in self._indicators]

    # ---------------------------------------------------------------- moments
    def rho_bar(self, l: int) -> sp.Expr:
        """``rho_bar_s = tr Sigma_s / d = E_nu[gamma_s]`` (0-based slot index; slot = token
        without clusters)."""
        return sp.Add(*[a.weight * a.gamma[l] for a in self.atoms])

    def rho(self, l: int, r_t: int) -> sp.Matrix:
        """``rho_s = Q*^T Sigma_s Q* / d = E_nu[gamma_s] I_{r_t}`` for the iid Gaussian teacher
        (0-based slot index)."""
        return self.rho_bar(l) * sp.eye(r_t)

    def token_rho_bar(self, l: int) -> sp.Expr:
        """``rho_bar`` of token ``l`` under the label configuration: ``sum_c e_{lc} rho_bar_{lc}``."""
        return self.token_combination(l, [self.rho_bar(s) for s in self.token_slots(l)])

    def token_rho(self, l: int, r_t: int) -> sp.Matrix:
        """``rho`` of token ``l`` under the label configuration: ``sum_c e_{lc} rho_{lc}``."""
        return self.token_combination(l, [self.rho(s, r_t) for s in self.token_slots(l)])

    def second_moment_groups(self) -> list[SecondMomentGroup]:
        """Atoms grouped by their eigenvalue vector (all an l2 entropic potential needs)."""
        groups: dict[tuple, list[SpectralAtom]] = {}
        for a in self.atoms:
            groups.setdefault(tuple(sp.sympify(g) for g in a.gamma), []).append(a)
        out = []
        for gamma, atoms in groups.items():
            w = sp.Add(*[a.weight for a in atoms])
            M = sp.zeros(self.S, self.S)
            for a in atoms:
                pi = sp.Matrix(a.pi)
                M += a.weight * pi * pi.T
            if self.has_clusters:  # e.g. (1 + mu)^2/2 + (1 - mu)^2/2 -> 1 + mu^2
                M = M.applyfunc(sp.expand)
            out.append(SecondMomentGroup(w, gamma, M))
        return out


def _empirical_atoms(covariances: Sequence[np.ndarray], shifts: np.ndarray | None, decimals: int,
                     what: str) -> list[SpectralAtom]:
    """Atoms of the empirical law of commuting covariances and shift vectors (one per ``what``)."""
    mats = []
    for l, S in enumerate(covariances):
        S = np.asarray(S, dtype=float)
        if S.ndim == 1:
            S = np.diag(S)
        if S.ndim != 2 or S.shape[0] != S.shape[1]:
            raise DeclarationError(f"data: covariance of {what} {l + 1} must be square, got shape {S.shape}")
        if not np.allclose(S, S.T, atol=1e-12 * max(1.0, np.abs(S).max())):
            raise DeclarationError(f"data: covariance of {what} {l + 1} is not symmetric")
        mats.append(S)
    L = len(mats)
    if L == 0:
        raise DeclarationError("data: need at least one token covariance")
    d = mats[0].shape[0]
    if any(S.shape != (d, d) for S in mats):
        raise DeclarationError("data: all token covariances must have the same dimension d")
    for l, S in enumerate(mats):
        if np.linalg.eigvalsh(S).min() < -1e-10 * max(1.0, np.abs(S).max()):
            raise DeclarationError(f"data: covariance of {what} {l + 1} is not positive semi-definite")
    for a in range(L):
        for b in range(a + 1, L):
            C = mats[a] @ mats[b] - mats[b] @ mats[a]
            if np.abs(C).max() > 1e-8 * max(1.0, np.abs(mats[a]).max() * np.abs(mats[b]).max()):
                raise DeclarationError(
                    f"data: covariances of {what}s {a + 1} and {b + 1} do not commute (Assumption 4.1)")
    P = np.zeros((L, d)) if shifts is None else np.asarray(shifts, dtype=float)
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
    return [SpectralAtom(sp.Float(w), tuple(sp.Float(x) for x in k[:L]), tuple(sp.Float(x) for x in k[L:]))
            for k, w in keys.items()]

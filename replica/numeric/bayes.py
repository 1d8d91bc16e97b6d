"""Bayes-optimal fixed points of any declared model: the state evolution on the Nishimori line.

The equations are those of :mod:`replica.symbolic.bayes`, generated into a module of kernels
(:mod:`replica.codegen.bayes`, read as :class:`~replica.numeric.bayes_model.BayesModel`); this module is the
generic numerics around them. One step of the map, at the state ``(q, V)`` (overlap and posterior
covariance, ``K x K``):

* output side: ``qhat = alpha E_xi sum_y Z_out g_out g_out^T`` at ``omega = q^{1/2} xi`` (and
  ``Psi_out = E sum_y Z_out log Z_out``), the label summed over its values (``Z_out`` the weights) or, for a
  continuous label, integrated on Gauss-Hermite nodes of its law given ``omega``;
* input side: ``q = E f_a f_a^T``, ``V = E f_v`` (the posterior mean and covariance of a weight row), the
  average running over the teacher's mixture components (``w* ~ N(mu_t, Sigma_t)``, a point mass for
  ``Sigma_t = 0``), each on a rule in ``zeta`` with ``B = A mu_t + L_t zeta``, ``L_t L_t^T = A Sigma_t A + A``.
  ``log Z_0`` is the log-sum-exp of the prior's terms, computed *centred* on the component
  (``log Z_0(B) - B^T mu_t + 1/2 mu_t^T A mu_t``), so that no two numbers of size ``A`` are subtracted: a
  +-1 prior's informed fixed point has ``A = qhat`` beyond ``1e100`` and ``V`` below ``1e-300``.

Quadrature: for one teacher field (``K = 1``) every average is a composite Gauss-Legendre rule with the
normal density in its weights (:func:`replica.numeric.kinks.composite_normal_rule`) whose panel boundaries
sit where the integrand switches -- where the label law changes (the channel's forms crossing their
thresholds, on the scale of the posterior's width) and where the posterior mean jumps between the
prior's mixture components -- so that it converges geometrically up to the perfect-recovery limit. For
``K >= 2`` a tensor Gauss-Hermite rule (:func:`replica.numeric.quadrature.gauss_hermite`). The error bars
are differences of fixed points: the point is re-solved on :meth:`BayesPlan.refined` (every rule finer)
from the working one (:func:`with_error_bars`), as the empirical-risk solver does
(:mod:`replica.numeric.accuracy`).

Reported at a fixed point (:class:`BayesPoint`): ``q``, ``mmse = rho - q``, the Bayes-optimal test error
``eps_g`` of the declared loss (the Bayes risk ``E_omega min_h E[l(h, y) | omega]``: the best test loss any
estimator reaches), the Bayes-optimal ``classification_error`` ``1 - E max_y Z_out(y)`` for a discrete
label, the free entropy ``Phi``, and the deviations from the Nishimori identities (teacher overlap = self
overlap, ``V = rho - q``, ``E Z g g^T = -E Z dg/domega``), which vanish at every exact fixed point.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConvergenceError, InvalidStateError, ParameterError
from .bayes_model import BayesModel
from .kinks import LADDER, PanelPlan, _base_grid, composite_normal_rule
from .quadrature import gauss_hermite, hermite_1d, legendre_1d

#: the branches: where the state evolution starts (q = EPS_START rho: the state AMP reaches from a random
#: start; q = (1 - EPS_START) rho: the informed start)
BRANCHES = ("uninformed", "informed")
EPS_START = 1e-6
#: the posterior covariance below this (times rho) is perfect recovery: the output side is evaluated there
V_FLOOR = 1e-300
#: a label probability below this at a node is dropped from the output averages (its contribution is far below
#: float resolution; g_out, a ratio of underflowing numbers, is not finite there)
Z_DEAD = 1e-200
#: coordinate-descent sweeps of the Bayes risk of a loss of several student fields
RISK_SWEEPS = 12
#: a K x K overlap whose second eigenvalue is below this (relative) is of rank one: a one-dimensional rule
RANK_ONE = 1e-12
#: two switch forms get their own tensor rule where their correlation matrix has eigenvalues above this
FORM_RULE_MIN_EIG = 0.2
#: the panel boundaries around a switch of the two-form rule, in units of its width
FORM_LADDER = np.array([-8.0, -4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0])
#: the default fixed-point tolerance (relative to rho)
TOL = 1e-12
#: Anderson acceleration starts below this residual (plain iterations before: what AMP follows)
ANDERSON_FROM = 1e-3


@dataclass(frozen=True)
class BayesPlan:
    """The quadrature of the Bayes-optimal averages: ``panels`` the composite rules of ``K = 1``,
    ``hermite`` Gauss-Hermite points per axis for ``K >= 2``, ``label_order`` Gauss-Hermite nodes of a
    continuous label's law (its integrands are polynomials of degree 2 in the label: exact from 2),
    a density prior's rule (``density_panels`` panels of ``density_order`` Gauss-Legendre points on its
    effective support) and ``teacher_order`` Gauss-Hermite points per grid node of it."""

    panels: PanelPlan = PanelPlan()
    hermite: int = 28
    label_order: int = 4
    density_panels: int = 48
    density_order: int = 8
    teacher_order: int = 24

    def refined(self) -> "BayesPlan":
        """Every rule finer: what an error bar re-solves on."""
        return BayesPlan(self.panels.refined(), self.hermite + max(4, self.hermite // 3), self.label_order + 2,
                         2 * self.density_panels, self.density_order + 4, self.teacher_order + 8)

    def describe(self) -> str:
        """One line for reports."""
        return (f"composite Gauss-Legendre in xi ({self.panels.describe()}) for one teacher field, Gauss-Hermite "
                f"order {self.hermite} per axis for more")


def psd_sqrt(M: np.ndarray) -> np.ndarray:
    """The symmetric square root of a symmetric positive semi-definite ``M`` (``C C^T = M``): it commutes with
    permutations of the units, so that a rule in ``xi`` treats exchangeable units alike (a Cholesky factor
    would not), and it exists at a committee's singular unspecialised ``q``."""
    M = np.asarray(M, dtype=float)
    if M.shape == (1, 1):
        return np.sqrt(np.maximum(M, 0.0))
    w, U = np.linalg.eigh((M + M.T) / 2)
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def upper_entries(M: np.ndarray) -> np.ndarray:
    """The independent entries of a symmetric matrix (upper triangle, row-major), node axes kept."""
    K = M.shape[0]
    return np.stack([M[i, j] for i in range(K) for j in range(i, K)])


def from_upper_entries(entries: np.ndarray, K: int) -> np.ndarray:
    """The symmetric ``K x K`` matrix of its independent entries (:func:`upper_entries`' inverse)."""
    out = np.empty((K, K) + np.shape(entries)[1:])
    k = 0
    for i in range(K):
        for j in range(i, K):
            out[i, j] = out[j, i] = entries[k]
            k += 1
    return out


def normal_rule(K: int, lines: list[tuple[np.ndarray, float, float]], plan: BayesPlan,
                smooth: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``(K, N)`` and weights for ``E_{z ~ N(0, I_K)}``: for ``K = 1`` the composite rule with panel
    boundaries around every switch ``n z = c`` of width ``w`` (``lines``: ``(n, c, w)``); a tensor
    Gauss-Hermite rule for ``K >= 2``; Gauss-Hermite of order 4 per axis for a ``smooth`` (polynomial of
    degree <= 3) integrand."""
    if smooth:
        rule = gauss_hermite(K, 4)
        return rule.nodes, rule.weights
    if K >= 2:
        rule = gauss_hermite(K, plan.hermite)
        return rule.nodes, rule.weights
    parts = [_base_grid(plan.panels)]
    for n, c, w in lines:
        n = float(np.ravel(n)[0])
        if abs(n) > 1e-300 and np.isfinite(c) and np.isfinite(w):
            parts.append(c / n + (w / abs(n)) * LADDER)
    b = np.concatenate(parts)
    b = np.unique(b[np.isfinite(b) & (np.abs(b) < plan.panels.cut)])
    x, wts = composite_normal_rule(b, plan.panels, floor=0.0)
    return x[None, :], wts


def two_dimensional(plan: BayesPlan) -> PanelPlan:
    """The panels of each axis of a two-dimensional composite rule: half the order per panel, twice the spacing,
    ``|t| <= 8`` (the normal density is below 1e-13 beyond), with :data:`FORM_LADDER` around the switches: ~1e4
    nodes, refined with the plan for the error bars."""
    p = plan.panels
    return PanelPlan(order=max(3, p.order // 2), spacing=2 * p.spacing, cut=8.0, split=p.split)


def nested_rule(lines: list[tuple[np.ndarray, float, float]], plan: BayesPlan) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``(2, N)`` and weights for ``E_{z ~ N(0, I_2)}`` of an integrand that switches across the lines
    ``n . z = c`` (width ``w``): an outer composite rule along the lines' mean normal, an inner one across it per
    outer node, whose panel boundaries sit where each line crosses that node's inner axis. The outer rule has
    boundaries where a line sweeps through the inner Gaussian (around ``c / n_1``, on the scale
    ``(w + |n_2|) / |n_1|``). For the test-point averages of two fields whose lines are nearly parallel (a
    committee near its unspecialised state), where a tensor rule resolves neither."""
    normals = np.array([np.ravel(n) for n, _, _ in lines])
    lengths = np.linalg.norm(normals, axis=1)
    use = lengths > 1e-300
    if not np.any(use):
        rule = gauss_hermite(2, plan.hermite)
        return rule.nodes, rule.weights
    G = sum(np.outer(n / l, n / l) for n, l in zip(normals[use], lengths[use]))
    _, U = np.linalg.eigh(G)
    e1, e2 = U[:, -1], U[:, 0]                       # outer axis: the lines' mean normal
    rot = [(float(n @ e1), float(n @ e2), c, w) for (n, c, w), ok in zip(lines, use) if ok]
    axis = two_dimensional(plan)
    outer = [_base_grid(axis)]
    for n1, n2, c, w in rot:
        if abs(n1) > 1e-300:
            outer.append(c / n1 + (w + abs(n2)) / abs(n1) * FORM_LADDER)
    b = np.concatenate(outer)
    b = np.unique(b[np.isfinite(b) & (np.abs(b) < axis.cut)])
    x1, w1 = composite_normal_rule(b, axis, floor=0.0)
    nodes, weights = [], []
    base = _base_grid(axis)
    for a, wa in zip(x1, w1):
        inner = [base]
        for n1, n2, c, w in rot:
            if abs(n2) > 1e-300:
                inner.append((c - n1 * a) / n2 + w / abs(n2) * FORM_LADDER)
        bi = np.concatenate(inner)
        bi = np.unique(bi[np.isfinite(bi) & (np.abs(bi) < axis.cut)])
        x2, w2 = composite_normal_rule(bi, axis, floor=0.0)
        nodes.append(a * e1[:, None] + x2[None, :] * e2[:, None])
        weights.append(wa * w2)
    return np.concatenate(nodes, axis=1), np.concatenate(weights)


# --------------------------------------------------------------------------- the prior
@dataclass
class EntropicAverages:
    """The input side at ``A = qhat``: ``q = E f_a f_a^T``, ``V = E f_v``, the teacher overlap
    ``m = E w* f_a^T``, ``psi_c = psi_P0(A) - 1/2 tr(A rho)`` (the centred entropic potential)."""

    q: np.ndarray
    V: np.ndarray
    m: np.ndarray
    psi_c: float


class PriorNumerics:
    """The prior of a :class:`BayesModel` at parameters ``p``: its terms, its teacher components, the
    posterior-mean denoiser and the input side of the map."""

    def __init__(self, bm: BayesModel, p: np.ndarray, plan: BayesPlan):
        self.bm, self.p, self.plan, self.K = bm, np.asarray(p, dtype=float), plan, bm.K
        K = self.K
        if bm.PRIOR == "mixture":
            w, mean, cov = bm.prior_teacher(self.p)
            self.weights = np.atleast_1d(np.asarray(w, dtype=float))
            n = self.weights.size
            self.means = np.asarray(mean, dtype=float).reshape(n, K)
            self.covs = np.asarray(cov, dtype=float).reshape(n, K, K)
            mu, rho = bm.prior_moments(self.p)
            self.mean, self.rho = float(mu), float(rho)
            self.grid = None
        else:
            self.grid = self._density_grid()
            vals, wts = self.grid
            self.weights, self.means = wts, vals[:, None]
            self.covs = np.zeros((vals.size, 1, 1))
            self.mean = float(np.sum(wts * vals))
            self.rho = float(np.sum(wts * vals ** 2))
        keep = self.weights > 0
        self.weights, self.means, self.covs = self.weights[keep], self.means[keep], self.covs[keep]

    # ---- a density prior: its grid
    def _log_density(self, w: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = np.asarray(self.bm.prior_log_density(w[None, :], self.p), dtype=float)
        return np.where(np.isnan(out), -np.inf, out)

    def _density_grid(self) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and normalised weights of a density prior: composite Gauss-Legendre on its effective support
        (where ``log p`` is within 60 of its maximum), panel boundaries at its kinks."""
        lo, hi = self.bm.SUPPORT
        scan_lo, scan_hi = max(lo, -1e4), min(hi, 1e4)
        x = np.linspace(scan_lo, scan_hi, 200001)
        lp = self._log_density(x)
        if not np.any(np.isfinite(lp)):
            raise ParameterError("prior", "the density is zero everywhere on its support")
        top = np.nanmax(lp[np.isfinite(lp)])
        inside = np.nonzero(lp > top - 60.0)[0]
        a = x[max(inside[0] - 1, 0)]
        b = x[min(inside[-1] + 1, x.size - 1)]
        kinks = []
        if self.bm.N_KINKS and self.bm.prior_kinks is not None:
            kinks = [float(k) for k in np.atleast_1d(self.bm.prior_kinks(self.p))]
        edges = np.unique(np.concatenate([np.linspace(a, b, self.plan.density_panels + 1),
                                          [k for k in kinks if a < k < b]]))
        gx, gw = legendre_1d(self.plan.density_order)
        half, mid = np.diff(edges) / 2, (edges[1:] + edges[:-1]) / 2
        nodes = (mid[:, None] + half[:, None] * gx).ravel()
        weights = (half[:, None] * gw).ravel()
        lp = self._log_density(nodes)
        w = weights * np.exp(lp - top)
        total = w.sum()
        if not (total > 0 and np.isfinite(total)):
            raise ParameterError("prior", "the density is not normalisable on its support")
        return nodes, w / total

    # ---- the terms of log Z_0
    def terms(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(c0, b, G)`` of the terms ``c0_j - 1/2 b_j^T A b_j + b_j^T B + 1/2 B^T G_j B`` at ``A`` (``K x K``,
        or ``K x K x N`` for one ``A`` per node): shapes ``(n, ...)``, ``(n, K, ...)``, ``(n, K, K, ...)``."""
        K = self.K
        if self.grid is not None:
            vals, wts = self.grid
            tail = np.shape(A)[2:]
            with np.errstate(divide="ignore"):
                c0 = np.broadcast_to(np.log(wts).reshape((-1,) + (1,) * len(tail)), (wts.size,) + tail)
            b = np.broadcast_to(vals.reshape((-1, 1) + (1,) * len(tail)), (wts.size, 1) + tail)
            G = np.zeros((wts.size, 1, 1) + tail)
            return c0, b, G
        c0, b, G = self.bm.prior_terms(upper_entries(np.asarray(A, dtype=float)), self.p)
        n = self.bm.N_TERMS
        tail = np.shape(c0)[1:]
        return (np.asarray(c0, dtype=float).reshape((n,) + tail), np.asarray(b, dtype=float).reshape((n, K) + tail),
                np.asarray(G, dtype=float).reshape((n, K, K) + tail))

    @staticmethod
    def _moments(expo: np.ndarray, slope: np.ndarray, G: np.ndarray):
        """Log-sum-exp over the terms (axis 0): ``(log Z, f_a, f_v)`` from the exponents ``(n, N)``, their
        ``B``-gradients ``(n, K, N)`` and Hessians ``(n, K, K, N)`` (broadcastable)."""
        top = np.max(expo, axis=0)
        e = np.exp(expo - top)
        Z = e.sum(axis=0)
        pi = e / Z
        f_a = np.einsum("jn,jkn->kn", pi, slope)
        second = np.einsum("jn,jkn,jln->kln", pi, slope, slope) + np.einsum("jn,jkln->kln", pi,
                                                                             np.broadcast_to(G, slope.shape[:2] + slope.shape[1:2] + slope.shape[2:]))
        f_v = second - f_a[:, None] * f_a[None, :]
        return top + np.log(Z), f_a, f_v

    def denoise(self, B: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The posterior mean ``f_a (K, N)``, covariance ``f_v (K, K, N)`` and ``log Z_0 (N)`` at ``B (K, N)`` and
        ``A`` (``K x K`` shared, or ``K x K x N``): the denoiser of Bayes-optimal AMP."""
        B = np.asarray(B, dtype=float)
        c0, b, G = self.terms(A)
        if np.ndim(A) == 2:
            c0, b, G = c0[..., None], b[..., None], G[..., None]
        A_ = np.asarray(A, dtype=float)
        A_ = A_[..., None] if A_.ndim == 2 else A_
        bAb = np.einsum("jkn,kln,jln->jn", b, np.broadcast_to(A_, G.shape[1:]), b)
        slope = b + np.einsum("jkln,ln->jkn", G, B)
        expo = c0 - bAb / 2 + np.einsum("jkn,kn->jn", b, B) + np.einsum("kn,jkln,ln->jn", B, G, B) / 2
        logZ, f_a, f_v = self._moments(expo, slope, G)
        return f_a, f_v, logZ

    def _crossings(self, c: np.ndarray, d1: np.ndarray, d2: np.ndarray) -> list[tuple[np.ndarray, float, float]]:
        """Switches of the posterior between terms along ``zeta`` (``K = 1``): roots of the difference of two
        exponents ``c_j + d1_j zeta + d2_j zeta^2``, each with the width ``1/|slope|`` of the switch."""
        out = []
        n = c.size
        if n > 12:  # a density's grid: a smooth posterior, no switches to place
            return out
        for j in range(n):
            for k in range(j + 1, n):
                a0, a1, a2 = c[j] - c[k], d1[j] - d1[k], d2[j] - d2[k]
                if abs(a2) < 1e-14 * (abs(a1) + abs(a0) + 1e-300):
                    roots = [-a0 / a1] if abs(a1) > 0 else []
                else:
                    disc = a1 * a1 - 4 * a2 * a0
                    roots = [] if disc < 0 else [(-a1 + s * math.sqrt(disc)) / (2 * a2) for s in (-1, 1)]
                for z in roots:
                    slope = abs(a1 + 2 * a2 * z)
                    if np.isfinite(z) and slope > 0:
                        out.append((np.array([1.0]), float(z), 1.0 / slope))
        return out

    def entropic(self, A: np.ndarray) -> EntropicAverages:
        """The input side at ``A`` (``K x K``): see :class:`EntropicAverages`."""
        K, A = self.K, np.asarray(A, dtype=float)
        c0, b, G = self.terms(A)
        q, V, m = np.zeros((K, K)), np.zeros((K, K)), np.zeros((K, K))
        psi = 0.0
        density = self.grid is not None
        for t in range(self.weights.size):
            mu, S = self.means[t], self.covs[t]
            L = psd_sqrt(A @ S @ A + A)
            d = b - mu[None, :]                                  # (n, K)
            base = c0 - 0.5 * np.einsum("jk,kl,jl->j", d, A, d)  # (n,)
            lin = d @ L                                          # (n, K): coefficient of zeta
            Amu = A @ mu
            if K == 1 and not density:
                s, mm = L[0, 0], Amu[0]
                lines = self._crossings(base + 0.5 * G[:, 0, 0] * mm * mm, lin[:, 0] + G[:, 0, 0] * mm * s,
                                        0.5 * G[:, 0, 0] * s * s)
                zeta, wz = normal_rule(1, lines, self.plan, smooth=self.weights.size == 1 and b.shape[0] == 1)
            elif density:
                x, wz = hermite_1d(self.plan.teacher_order)
                zeta = x[None, :]
            else:
                zeta, wz = normal_rule(K, [], self.plan, smooth=b.shape[0] == 1)
            B = Amu[:, None] + L @ zeta                          # (K, N)
            expo = base[:, None] + lin @ zeta + 0.5 * np.einsum("kn,jkl,ln->jn", B, G, B)
            slope = b[:, :, None] + np.einsum("jkl,ln->jkn", G, B)
            logZc, f_a, f_v = self._moments(expo, slope, G[..., None])
            wt = self.weights[t]
            q += wt * np.einsum("kn,ln,n->kl", f_a, f_a, wz)
            V += wt * np.einsum("kln,n->kl", f_v, wz)
            # E[w* | B] on this component: mu + S A L^{-T} zeta
            if np.any(S):
                post = mu[:, None] + S @ A @ np.linalg.solve(L.T, zeta) if np.linalg.matrix_rank(L) == K else \
                    mu[:, None] + S @ A @ np.linalg.pinv(L.T) @ zeta
            else:
                post = np.broadcast_to(mu[:, None], zeta.shape)
            m += wt * np.einsum("kn,ln,n->kl", post, f_a, wz)
            psi += wt * (float(logZc @ wz) - 0.5 * float(np.trace(A @ S)))
        return EntropicAverages(q, V, m, psi)


# --------------------------------------------------------------------------- the label law
@dataclass
class EnergeticAverages:
    """The output side at ``(q, V)``: ``qhat1 = E sum_y Z g g^T`` (``qhat / alpha``), its Nishimori twin
    ``-E sum_y Z dg/domega``, ``psi_out = E sum_y Z log Z``, and the label law's total mass (1)."""

    qhat1: np.ndarray
    twin: np.ndarray
    psi_out: float
    mass: float


class OutputNumerics:
    """The label law of a :class:`BayesModel` at parameters ``p``: the output side of the map and the
    test-point quantities."""

    def __init__(self, bm: BayesModel, p: np.ndarray, plan: BayesPlan):
        self.bm, self.p, self.plan, self.K = bm, np.asarray(p, dtype=float), plan, bm.K
        if bm.N_SWITCHES:
            forms, offsets, extra = bm.output_switches(self.p)
            self.forms = np.asarray(forms, dtype=float).reshape(bm.N_SWITCHES, self.K)
            self.offsets = np.atleast_1d(np.asarray(offsets, dtype=float))
            self.extra = np.atleast_1d(np.asarray(extra, dtype=float))
        else:
            self.forms = np.zeros((0, self.K))

    def rule(self, q: np.ndarray, V: np.ndarray, points: Sequence[float] = ()
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """``(nodes, omega, weights, axis)``: the rule (boundaries where the label law switches, and at ``points``
        of a one-dimensional rule) and the fields ``omega`` at its nodes; ``axis`` is the vector with
        ``omega = axis * eta`` when the rule is one-dimensional in ``eta`` (one field, or ``q`` of rank one),
        else ``None`` (the nodes are ``xi`` with ``omega = q^{1/2} xi``, or ``omega`` itself for two switch forms)."""
        C = psd_sqrt(q)
        axis = None
        if self.K == 1:
            axis = C[:, 0]
        else:
            w, U = np.linalg.eigh((q + q.T) / 2)
            if w[-2] <= RANK_ONE * max(w[-1], 1e-300):  # q of rank one (a committee's unspecialised state): the
                axis = U[:, -1] * math.sqrt(max(w[-1], 0.0))  # fields move along one direction, a 1-D rule
        lines = []
        for f, o, e in zip(self.forms, getattr(self, "offsets", ()), getattr(self, "extra", ())):
            n = np.array([float(f @ axis)]) if axis is not None else C.T @ f
            lines.append((n, -o, math.sqrt(max(float(f @ V @ f) + e, 0.0))))
        if axis is not None:
            lines += [(np.array([1.0]), float(x), 0.0) for x in points]
            eta, wts = normal_rule(1, lines, self.plan, smooth=not self.bm.discrete and not points)
            return eta, axis[:, None] * eta, wts, axis
        if self.K == 2 and len(lines) == 2:
            rule = self._form_rule(q, V)
            if rule is not None:
                return (*rule, None)
        xi, wts = normal_rule(self.K, lines, self.plan, smooth=not self.bm.discrete)
        return xi, C @ xi, wts, None

    def _test_points(self, axis: np.ndarray, eta: np.ndarray, V: np.ndarray, labs) -> list[float]:
        """Where the most probable label changes along a one-dimensional rule (bisected to 1e-15): the kinks
        of the classification error's and the Bayes risk's integrands, put on panel boundaries."""
        best = np.argmax(np.stack([Z for _, Z, *_ in labs]), axis=0)
        out = []
        for k in np.nonzero(best[1:] != best[:-1])[0]:
            a, b = float(eta[0, k]), float(eta[0, k + 1])
            ia, ib = best[k], best[k + 1]
            for _ in range(60):
                mid = 0.5 * (a + b)
                Z = np.exp(self.bm.output_laws(axis[:, None] * np.array([[mid]]), upper_entries(V), self.p)[0][:, 0])
                if Z[ia] >= Z[ib]:
                    a = mid
                else:
                    b = mid
                if b - a <= 1e-15 * max(1.0, abs(a)):
                    break
            out.append(0.5 * (a + b))
        return out

    def _form_rule(self, q: np.ndarray, V: np.ndarray):
        """Two switch forms ``u = J omega`` of two fields: a tensor composite rule in the standardised forms
        ``t = u / sd(u)``, panel boundaries around each form's switch on its own axis, the weights the
        Gaussian density of ``t`` (correlation ``R``); ``None`` where ``J`` is singular or ``R`` nearly so
        (a committee near its unspecialised state: the Gauss-Hermite rule in ``xi`` serves there)."""
        J = self.forms
        if abs(np.linalg.det(J)) < 1e-12 * np.abs(J).max() ** 2:
            return None
        S = J @ q @ J.T
        sd = np.sqrt(np.clip(np.diag(S), 0.0, None))
        if np.any(sd <= 0):
            return None
        R = S / np.outer(sd, sd)
        if np.linalg.eigvalsh(R)[0] < FORM_RULE_MIN_EIG:
            return None
        axes = []
        axis = two_dimensional(self.plan)
        for k in range(2):
            w = math.sqrt(max(float(J[k] @ V @ J[k]) + self.extra[k], 0.0)) / sd[k]
            b = np.concatenate([_base_grid(axis), -self.offsets[k] / sd[k] + w * FORM_LADDER])
            b = np.unique(b[np.isfinite(b) & (np.abs(b) < axis.cut)])
            t, wn = composite_normal_rule(b, axis, floor=0.0)
            axes.append((t, wn / np.exp(-0.5 * t * t) * math.sqrt(2 * math.pi)))  # plain Gauss-Legendre weights
        t1, t2 = np.meshgrid(axes[0][0], axes[1][0], indexing="ij")
        w1, w2 = np.meshgrid(axes[0][1], axes[1][1], indexing="ij")
        t = np.stack([t1.ravel(), t2.ravel()])
        Rinv = np.linalg.inv(R)
        dens = np.exp(-0.5 * np.einsum("kn,kl,ln->n", t, Rinv, t)) / (2 * math.pi * math.sqrt(np.linalg.det(R)))
        wts = (w1 * w2).ravel() * dens
        omega = np.linalg.solve(J, sd[:, None] * t)
        return omega, omega, wts

    def labels(self, omega: np.ndarray, V: np.ndarray):
        """Per label node: ``(y, weight, log Z, g, dg)`` at the fields ``omega (K, N)``: every label value with
        weight ``Z`` (``exp(log Z)``), or Gauss-Hermite nodes of a continuous label's law (weight the rule's)."""
        Vv = upper_entries(V)
        out = []
        with np.errstate(all="ignore"):  # far from a switch at a tiny V: Z = 0 there, g and dg overflow
            return self._labels(omega, Vv, out)

    def _labels(self, omega, Vv, out):
        if self.bm.discrete:
            logZ, g, dg = self.bm.output_laws(omega, Vv, self.p)
            n, K = len(self.bm.LABEL_VALUES), self.K
            g = np.reshape(g, (n, K) + np.shape(logZ)[1:])
            dg = np.reshape(dg, (n, K * K) + np.shape(logZ)[1:])
            for k, y in enumerate(self.bm.LABEL_VALUES):
                out.append((np.full(omega.shape[1:], y), np.exp(logZ[k]), logZ[k], g[k], dg[k]))
        else:
            mean, var = self.bm.label_law(omega, Vv, self.p)  # (2, N)
            x, w = hermite_1d(self.plan.label_order)
            for xk, wk in zip(x, w):
                yy = mean + np.sqrt(var) * xk
                logZ, g, dg = self.bm.output_law(omega, yy[None], Vv, self.p)
                out.append((yy, np.full(yy.shape, wk), logZ, g, dg))
        return out

    def energetic(self, q: np.ndarray, V: np.ndarray) -> EnergeticAverages:
        """The output side at ``(q, V)`` (see :class:`EnergeticAverages`)."""
        K = self.K
        V = np.asarray(V, dtype=float) + V_FLOOR * np.eye(K)
        _, omega, wts, _ = self.rule(q, V)
        qh, tw = np.zeros((K, K)), np.zeros((K, K))
        psi = mass = 0.0
        with np.errstate(all="ignore"):
            for _, Z, logZ, g, dg in self.labels(omega, V):
                g = np.reshape(g, (K,) + np.shape(Z))
                dg = np.reshape(dg, (K, K) + np.shape(Z))
                # a label of probability below Z_DEAD at a node adds nothing a float sum keeps (its g and dg,
                # ratios of underflowing numbers, are not computed there)
                live = Z > Z_DEAD
                if not (np.all(np.isfinite(g[:, live])) and np.all(np.isfinite(dg[:, :, live]))):
                    raise InvalidStateError("g_out", f"the label law's g_out is not finite at q = {q.tolist()}, "
                                                     f"V = {V.tolist()}", {"q": q.tolist(), "V": V.tolist()})
                wz = np.where(live, Z * wts, 0.0)
                qh += np.einsum("kn,ln,n->kl", np.where(live, g, 0.0), np.where(live, g, 0.0), wz)
                tw -= np.einsum("kln,n->kl", np.where(live, dg, 0.0), wz)
                psi += float(np.sum(np.where(live, wz * logZ, 0.0)))
                mass += float(np.sum(wz))
        return EnergeticAverages(qh, tw, psi, mass)

    def test(self, q: np.ndarray, V: np.ndarray) -> dict[str, Any]:
        """The Bayes-optimal test errors at ``(q, V)``: ``classification_error = 1 - E max_y Z_out(y)`` (discrete
        labels) and ``eps_g = E_omega min_h E[l(h, y) | omega]`` (the Bayes risk of the declared loss; one
        student field), with ``<key>_reason`` where one is not defined."""
        K = self.K
        V = np.asarray(V, dtype=float) + V_FLOOR * np.eye(K)
        eta, omega, wts, axis = self.rule(q, V)
        labs = self.labels(omega, V)
        if self.bm.discrete and axis is not None:
            points = self._test_points(axis, eta, V, labs)
            if points:
                eta, omega, wts, axis = self.rule(q, V, points)
                labs = self.labels(omega, V)
        out: dict[str, Any] = {}
        if self.bm.discrete:
            c_wts, c_labs = wts, labs
            if self.K == 2 and axis is None and self._form_rule(q, V) is None:
                # the map's tensor Gauss-Hermite rule is accurate for its smooth integrands, not for the kinks of
                # the max over labels: a nested rule across the switch lines (the Bayes risk of a smooth loss
                # is smooth in omega and stays on the map's rule)
                C = psd_sqrt(q)
                lines = [(C.T @ f, -o, math.sqrt(max(float(f @ V @ f) + e, 0.0)))
                         for f, o, e in zip(self.forms, self.offsets, self.extra)]
                xi, c_wts = nested_rule(lines, self.plan)
                c_labs = self.labels(C @ xi, V)
            best = np.max(np.stack([Z for _, Z, *_ in c_labs]), axis=0)
            out["classification_error"] = float(1.0 - best @ c_wts)
        ys = [y for y, *_ in labs]
        ws = [Z for _, Z, *_ in labs]
        if self.bm.discrete:
            span = max(abs(v) for v in self.bm.LABEL_VALUES) + 1.0
            lo, hi = np.full(omega.shape[1], -50.0 * span), np.full(omega.shape[1], 50.0 * span)
        else:
            mean, var = self.bm.label_law(omega, upper_entries(V), self.p)  # (2, N)
            sd = np.sqrt(var)
            lo, hi = mean - 12 * sd, mean + 12 * sd

        def risk(h):
            total = np.zeros(h.shape[1:])
            for y, w in zip(ys, ws):
                total += w * np.asarray(self.bm.test_loss(h, y[None], self.p), dtype=float)
            return total

        R = self.bm.R
        h = np.zeros((R, omega.shape[1]))
        best = risk(h)
        # one student field: one golden-section search per node; several: coordinate descent (golden section
        # along each field in turn) until a sweep gains nothing (a local minimum of a non-convex loss)
        for _ in range(1 if R == 1 else RISK_SWEEPS):
            before = best.copy()
            for k in range(R):
                def along(x, k=k):
                    hh = h.copy()
                    hh[k] = x
                    return risk(hh)

                best, h[k] = golden_minimum(along, lo, hi)
            if np.max(np.abs(before - best)) <= 1e-13 * max(float(np.max(np.abs(best))), 1e-300):
                break
        out["eps_g"] = float(best @ wts)
        return out


def golden_minimum(f, lo: np.ndarray, hi: np.ndarray, iterations: int = 70, scan: int = 121
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(min f, argmin f)`` on ``[lo, hi]`` per node, vectorised over the nodes: the best of ``scan`` points
    (dense near the middle of the bracket, sinh-spaced), then golden-section search between its neighbours
    (``f`` unimodal there: the expected value of a convex loss, or of a saturating one such as ``tanh``, whose
    plateaus would mislead a golden search over the whole bracket)."""
    grid = np.sinh(np.linspace(-5.0, 5.0, scan)) / math.sinh(5.0)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    pts = mid[None, :] + half[None, :] * grid[:, None]
    vals = np.stack([f(p) for p in pts])
    k = np.argmin(vals, axis=0)
    cols = np.arange(vals.shape[1])
    lo = pts[np.maximum(k - 1, 0), cols]
    hi = pts[np.minimum(k + 1, scan - 1), cols]
    r = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo.astype(float).copy(), hi.astype(float).copy()
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        left = fc < fd
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new, d_new = b - r * (b - a), a + r * (b - a)
        # one new evaluation per node (the other point is kept)
        x = np.where(left, c_new, d_new)
        fx = f(x)
        fc, fd, c, d = (np.where(left, fx, fd), np.where(left, fc, fx), np.where(left, c_new, d),
                        np.where(left, c, d_new))
    cand = np.stack([fc, fd, f(a), f(b)])
    arg = np.stack([c, d, a, b])
    k = np.argmin(cand, axis=0)
    idx = np.arange(cand.shape[1]) if cand.ndim == 2 else ()
    return cand[k, idx], arg[k, idx]


# --------------------------------------------------------------------------- the fixed point
@dataclass
class BayesPoint:
    """A Bayes-optimal fixed point (see the module docstring); matrices ``K x K``, scalars for ``K = 1`` in
    the JSON (:func:`point_dict`)."""

    model: str
    alpha: float
    branch: str
    parameters: dict[str, float]
    q: np.ndarray
    V: np.ndarray
    m: np.ndarray
    qhat: np.ndarray
    rho: float
    free_entropy: float
    psi_out: float
    eps_g: float | None
    classification_error: float | None
    converged: bool
    iterations: int
    residual: float
    contraction: float
    seconds: float
    quadrature: str
    reasons: dict[str, str] = field(default_factory=dict)
    nishimori: dict[str, float] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def mmse(self) -> np.ndarray:
        """``rho - q``: the minimal mean-squared error per weight entry."""
        return self.rho * np.eye(self.q.shape[0]) - self.q

    def values(self) -> dict[str, float]:
        """The reported numbers by name (matrix entries ``q_11``, ...), for bars and comparisons."""
        K = self.q.shape[0]
        out: dict[str, float] = {}
        for name, M in (("q", self.q), ("mmse", self.mmse)):
            if K == 1:
                out[name] = float(M[0, 0])
            else:
                for i in range(K):
                    for j in range(i, K):
                        out[f"{name}_{i + 1}{j + 1}"] = float(M[i, j])
        out["free_entropy"] = self.free_entropy
        for k in ("eps_g", "classification_error"):
            v = getattr(self, k)
            if v is not None:
                out[k] = float(v)
        return out


class BayesSolver:
    """The Bayes-optimal state evolution of a :class:`BayesModel` at fixed parameters.

    ``solve(alpha, branch)`` iterates the map from the branch's start (Anderson-accelerated, every step
    checked: ``q`` and ``V`` symmetric positive semi-definite) to ``tol`` (relative to ``rho``) or raises
    :class:`~replica.errors.ConvergenceError` with the point, the iterations and the residual.
    """

    def __init__(self, bm: BayesModel, parameters: Mapping[str, float] | None = None, plan: BayesPlan | None = None,
                 tol: float = TOL, max_iter: int = 20000):
        self.bm = bm
        self.p = bm.parameter_vector(dict(parameters or {}))
        self.parameters = dict(zip(bm.PARAMETERS, self.p.tolist()))
        self.plan = plan or BayesPlan()
        self.prior = PriorNumerics(bm, self.p, self.plan)
        self.output = OutputNumerics(bm, self.p, self.plan)
        self.tol, self.max_iter, self.K = tol, max_iter, bm.K
        self.rho = self.prior.rho

    def with_plan(self, plan: BayesPlan) -> "BayesSolver":
        """This solver on another quadrature plan."""
        return BayesSolver(self.bm, self.parameters, plan, self.tol, self.max_iter)

    # ---- one step
    def step(self, q: np.ndarray, V: np.ndarray, alpha: float):
        """``(q', V', qhat, entropic, energetic)``: one application of the map."""
        en = self.output.energetic(q, V)
        qhat = alpha * (en.qhat1 + en.qhat1.T) / 2
        ent = self.prior.entropic(qhat)
        q_new = (ent.q + ent.q.T) / 2
        V_new = (ent.V + ent.V.T) / 2
        return q_new, V_new, qhat, ent, en

    def start(self, branch: str) -> tuple[np.ndarray, np.ndarray]:
        """The start of a branch: ``q = EPS_START rho I`` (uninformed) or ``(1 - EPS_START) rho I`` (informed)."""
        if branch not in BRANCHES:
            raise ParameterError("branch", f"unknown branch {branch!r}; Bayes-optimal branches: {list(BRANCHES)}")
        K, rho = self.K, self.rho
        eps = EPS_START if branch == "uninformed" else 1.0 - EPS_START
        q = eps * rho * np.eye(K)
        return q, rho * np.eye(K) - q

    def solve(self, alpha: float, branch: str = "uninformed", start: tuple[np.ndarray, np.ndarray] | None = None,
              max_iter: int | None = None) -> BayesPoint:
        """The fixed point the state evolution reaches from the branch's start (or ``start = (q, V)``) at
        ``alpha``: plain iterations (what AMP does) until the residual is small, then Anderson acceleration;
        an accelerated end that is not linearly stable (the middle, unstable fixed point between two
        branches, which the iteration never reaches) is redone with plain iterations only."""
        if not (np.isfinite(alpha) and alpha >= 0):
            raise ParameterError("alpha", f"must be a finite number >= 0, got {alpha}")
        t0 = time.perf_counter()
        q, V = start if start is not None else self.start(branch)
        limit = max_iter or self.max_iter
        q, V, it, res, ratio, accelerated = self._iterate(np.array(q, dtype=float), np.array(V, dtype=float), alpha,
                                                          limit, True)
        # plain iterations converge only to a stable fixed point; an accelerated end is checked
        radius = self.spectral_radius(q, V, alpha) if accelerated else ratio
        if radius > 1.0:
            # plain steps from the start pass by the unstable point and leave it along its unstable direction;
            # they are accelerated again only once they have left it and converge elsewhere (a committee's
            # specialised state contracts slowly: ~130 plain steps at alpha = 3). An accelerated end that is
            # unstable again is redone with plain steps only.
            q0, V0 = start if start is not None else self.start(branch)
            x0 = (np.array(q0, dtype=float), np.array(V0, dtype=float))
            avoid = np.concatenate([upper_entries(q), upper_entries(V)])
            q, V, extra, res, radius, accelerated = self._iterate(*x0, alpha, limit, True, avoid=avoid)
            it += extra
            if accelerated:
                radius = self.spectral_radius(q, V, alpha)
                if radius > 1.0:
                    q, V, extra, res, radius, _ = self._iterate(*x0, alpha, limit, False)
                    it += extra
        point = self.evaluate(q, V, alpha, branch)
        point.iterations, point.residual, point.converged = it, res, True
        point.contraction = radius
        point.seconds = time.perf_counter() - t0
        return point

    def _iterate(self, q, V, alpha, limit, accelerate, avoid: np.ndarray | None = None):
        """Iterate the map from ``(q, V)``: ``(q, V, iterations, residual, last residual ratio, accelerated)``.
        With ``avoid`` (an unstable fixed point's independent entries) acceleration waits until the iterates
        have left it: ten times farther than their closest approach, residuals falling for three steps."""
        K, rho, tol = self.K, self.rho, self.tol
        x = np.concatenate([upper_entries(q), upper_entries(V)])
        history: list[np.ndarray] = []
        residuals: list[np.ndarray] = []
        best, stalled = np.inf, 0
        res, ratio, accelerated = np.inf, 0.0, False
        closest, falling, away = np.inf, 0, avoid is None
        for it in range(1, limit + 1):
            q_new, V_new, *_ = self.step(q, V, alpha)
            x_new = np.concatenate([upper_entries(q_new), upper_entries(V_new)])
            r = x_new - x
            res_prev, res = res, float(np.max(np.abs(r))) / max(rho, 1e-300)
            ratio = res / res_prev if np.isfinite(res_prev) and res_prev > 0 else 0.0
            if res <= tol:
                return q_new, V_new, it, res, ratio, accelerated
            if not away:
                dist = float(np.max(np.abs(x_new - avoid)))
                closest = min(closest, dist)
                falling = falling + 1 if dist > 10 * closest and ratio < 1.0 else 0
                if falling >= 3:
                    away = True
                    history.clear()
                    residuals.clear()
                    best, stalled = res, 0
            if res < 0.5 * best:
                best, stalled = res, 0
            else:
                stalled += 1
            use = accelerate and away and res < ANDERSON_FROM and stalled < 10
            if stalled >= 10:  # acceleration is not helping: plain steps for a while
                history.clear()
                residuals.clear()
                best, stalled = res, -50
            history.append(x.copy())
            residuals.append(r)
            del history[:-5], residuals[:-5]
            x_next = _anderson(history, residuals) if use and len(history) >= 2 else x_new
            accelerated = accelerated or x_next is not x_new
            n = x.size // 2
            q_try, V_try = from_upper_entries(x_next[:n], K), from_upper_entries(x_next[n:], K)
            if not (_admissible(q_try, rho) and _admissible(V_try, rho)):
                q_try, V_try, x_next = q_new, V_new, x_new
                history.clear()
                residuals.clear()
            q, V, x = q_try, V_try, x_next
        raise ConvergenceError(f"Bayes-optimal state evolution of {self.bm.MODEL} at alpha={alpha:g} did not converge "
                               f"to {tol:g}; try --max-iter, or a looser --tol near a transition",
                               [res], limit, {"q": q.tolist(), "V": V.tolist()})

    def spectral_radius(self, q: np.ndarray, V: np.ndarray, alpha: float, h: float = 1e-6) -> float:
        """The spectral radius of the map's Jacobian at ``(q, V)`` (finite differences on the independent
        entries, steps ``h rho`` kept admissible): below 1 at a fixed point the iteration reaches."""
        K, rho = self.K, self.rho
        x = np.concatenate([upper_entries(q), upper_entries(V)])
        n = x.size // 2

        def F(xv):
            qn, Vn, *_ = self.step(from_upper_entries(xv[:n], K), from_upper_entries(xv[n:], K), alpha)
            return np.concatenate([upper_entries(qn), upper_entries(Vn)])

        f0 = F(x)
        J = np.empty((x.size, x.size))
        for k in range(x.size):
            e = np.zeros(x.size)
            step = h * rho
            e[k] = step
            xp = x + e
            if not (_admissible(from_upper_entries(xp[:n], K), rho) and _admissible(from_upper_entries(xp[n:], K), rho)):
                step = -step
                xp = x - e
            J[:, k] = (F(xp) - f0) / step
        if not np.all(np.isfinite(J)):
            return 0.0  # a perfect-recovery end (q = rho, V = 0): the map is flat there
        return float(np.max(np.abs(np.linalg.eigvals(J))))

    def evaluate(self, q: np.ndarray, V: np.ndarray, alpha: float, branch: str) -> BayesPoint:
        """Everything reported at a fixed point ``(q, V)``: the conjugate, the free entropy
        ``Phi = psi_c + 1/2 tr(V qhat) + alpha Psi_out``, the test errors, the Nishimori deviations."""
        en = self.output.energetic(q, V)
        qhat = alpha * (en.qhat1 + en.qhat1.T) / 2
        ent = self.prior.entropic(qhat)
        with np.errstate(all="ignore"):
            half = 0.5 * float(np.trace(np.where(V > 0, V, 0.0) @ qhat)) if np.all(np.isfinite(qhat)) else 0.0
        phi = ent.psi_c + half + alpha * en.psi_out
        tests = self.output.test(q, V)
        rho = self.rho
        scale = max(rho, 1e-300)
        nish = {
            "teacher_overlap": float(np.max(np.abs(ent.m - ent.q))) / scale,
            "posterior_variance": float(np.max(np.abs(rho * np.eye(self.K) - ent.q - ent.V))) / scale,
            "conjugate": float(np.max(np.abs(en.qhat1 - en.twin)) / max(np.max(np.abs(en.qhat1)), 1e-300)),
            "label_mass": abs(en.mass - 1.0),
        }
        reasons = {k: v for k, v in tests.items() if k.endswith("_reason")}
        return BayesPoint(self.bm.MODEL, float(alpha), branch, dict(self.parameters), np.array(q), np.array(V),
                          ent.m, qhat, rho, float(phi), en.psi_out, tests.get("eps_g"),
                          tests.get("classification_error"), False, 0, float("nan"), 0.0, 0.0,
                          self.plan.describe(), reasons, nish)


def _admissible(M: np.ndarray, rho: float) -> bool:
    """``M`` symmetric positive semi-definite and below ``rho`` (a state of the map)."""
    if not np.all(np.isfinite(M)):
        return False
    w = np.linalg.eigvalsh((M + M.T) / 2)
    return bool(w[0] >= -1e-14 * rho and w[-1] <= rho * (1 + 1e-9) * M.shape[0])


def _anderson(xs: list[np.ndarray], rs: list[np.ndarray]) -> np.ndarray:
    """Anderson mixing: the combination of the last iterates ``x_k + r_k`` whose residuals cancel best."""
    X, R = np.array(xs), np.array(rs)
    if len(xs) < 2:
        return X[-1] + R[-1]
    dR = np.diff(R, axis=0)
    dX = np.diff(X, axis=0)
    try:
        gamma, *_ = np.linalg.lstsq(dR.T, R[-1], rcond=1e-12)
    except np.linalg.LinAlgError:
        return X[-1] + R[-1]
    return X[-1] + R[-1] - (dX + dR).T @ gamma


# --------------------------------------------------------------------------- error bars
def with_error_bars(solver: BayesSolver, point: BayesPoint) -> BayesPoint:
    """The point re-solved on the refined plan from the working one; every reported number gets the bar
    ``|refined - working|`` plus what the iteration left (``residual / (1 - contraction)``), and the refined
    values are reported (as :mod:`replica.numeric.accuracy` does for the empirical-risk solver)."""
    fine_solver = solver.with_plan(solver.plan.refined())
    fine = fine_solver.solve(point.alpha, point.branch, start=(point.q, point.V))
    work, best = point.values(), fine.values()
    left = max(point.residual, fine.residual) / max(1.0 - max(point.contraction, fine.contraction, 0.0), 1e-3)
    bars = {}
    for k, v in best.items():
        w = work.get(k)
        scale = abs(v) if k in ("free_entropy", "eps_g", "classification_error") else solver.rho
        bars[k] = (abs(v - w) if w is not None else float("inf")) + left * max(scale, 1e-300) + 1e-15 * max(abs(v), 1)
    fine.errors = bars
    fine.iterations += point.iterations
    fine.seconds += point.seconds
    fine.quadrature = f"{solver.plan.describe()}; bars from a re-solve on the refined rules"
    return fine


# --------------------------------------------------------------------------- the JSON
def _matrix(M: np.ndarray):
    return float(M[0, 0]) if M.shape == (1, 1) else [[float(v) for v in row] for row in M]


def point_dict(point: BayesPoint) -> dict[str, Any]:
    """The JSON of ``replica solve --bayes`` (strict: no NaN; ``null`` with ``<key>_reason``)."""
    out: dict[str, Any] = {
        "model": point.model, "mode": "bayes", "alpha": point.alpha, "branch": point.branch,
        "parameters": point.parameters,
        "q": _matrix(point.q), "mmse": _matrix(point.mmse), "qhat": _matrix(point.qhat),
        "rho": point.rho, "eps_g": point.eps_g,
    }
    if point.eps_g is None:
        out["eps_g_reason"] = point.reasons.get("eps_g_reason", "not computed")
    if point.classification_error is not None:
        out["classification_error"] = point.classification_error
    out.update({"free_entropy": point.free_entropy, "converged": point.converged, "iterations": point.iterations,
                "residual": point.residual, "seconds": point.seconds, "quadrature": point.quadrature,
                "nishimori": point.nishimori, "errors": point.errors, "notes": point.notes})
    return out

"""The paper's tied attention model (docs/explanation/theory.md §1–6, L = 2, r = r_t = 1), written out by hand.

This module is deliberately independent of ``replica`` (no generated module, no sympy): it is
the second, hand-derived implementation that the certified reference solver runs on.

Per-sample loss (docs/explanation/theory.md §1 with rows of ``S`` and ``T`` summing to one, ``rho_bar = sigma^2``)::

    l(h; t) = sigma^2 [ (t_1 - s(u_1))^2 + (t_2 - s(u_2))^2 ],
    u_1 = h_1 (h_1 - h_2),  u_2 = h_2 (h_2 - h_1),  s = logistic sigmoid,

because ``softmax_row(h h^T)_{11} = s(h_1^2 - h_1 h_2)`` and, each row summing to one, the two
entries of a row carry the same squared error. The target diagonal is
``t_i = (1 - omega) s(u*_i) + omega A_ii`` with ``u*`` the same function of the teacher
fields ``h*``. The Moreau bracket (docs/explanation/theory.md §3) at prox centre ``y`` is::

    F(h; y, t, V) = |h - y|^2 / (2 V) + l(h; t).

Reduced order parameters ``x = (q, V, m, theta)`` (docs/explanation/theory.md §6): token fields
``y_l = m pi_l + sqrt(q) xi_l`` with ``pi = (1, -1)`` and
``h*_l = (theta / sqrt q) xi_l + sqrt(rho - theta^2 / q) eta_l``, ``rho = sigma^2``.

Each ``L_i(u) = sigma^2 (t_i - s(u))^2`` is unimodal in ``u`` (its derivative
``-2 sigma^2 (t_i - s) s'`` changes sign once, at ``u = logit t_i``): the interval bounds of
:mod:`benchmarks.certify.globalmin` rest on that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

PAPER_A = ((0.6, 0.4), (0.4, 0.6))
SECOND_A = ((0.3, 0.7), (0.8, 0.2))


@dataclass(frozen=True)
class Params:
    """Model parameters: positionality ``omega``, ``sigma``, ``lam`` and the row-stochastic ``A``."""

    omega: float = 0.3
    sigma: float = 0.5
    lam: float = 0.01
    A: tuple = PAPER_A

    def __post_init__(self):
        A = np.asarray(self.A, dtype=float)
        if A.shape != (2, 2) or not np.allclose(A.sum(axis=1), 1.0) or (A < 0).any():
            raise ValueError("A must be a 2x2 row-stochastic matrix")
        if not 0.0 <= self.omega <= 1.0:
            raise ValueError("omega must be in [0, 1]")

    @property
    def sig2(self) -> float:
        return self.sigma ** 2

    @property
    def rho(self) -> float:
        return self.sigma ** 2

    @property
    def a11(self) -> float:
        return float(self.A[0][0])

    @property
    def a22(self) -> float:
        return float(self.A[1][1])


# ----------------------------------------------------------------------------- scalar kernels
@njit(cache=True, inline="always")
def sigmoid(u):
    if u >= 0.0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def loss_terms(u, t, sig2):
    """``L(u) = sig2 (t - s)^2`` and its first two derivatives in ``u``."""
    s = sigmoid(u)
    s1 = s * (1.0 - s)
    s2 = s1 * (1.0 - 2.0 * s)
    d = t - s
    return sig2 * d * d, -2.0 * sig2 * d * s1, 2.0 * sig2 * (s1 * s1 - d * s2)


@njit(cache=True, inline="always")
def bracket(h1, h2, y1, y2, t1, t2, V, sig2):
    u1 = h1 * (h1 - h2)
    u2 = h2 * (h2 - h1)
    s1 = sigmoid(u1)
    s2 = sigmoid(u2)
    return ((h1 - y1) ** 2 + (h2 - y2) ** 2) / (2.0 * V) + sig2 * ((t1 - s1) ** 2 + (t2 - s2) ** 2)


@njit(cache=True, inline="always")
def bracket_newton(h1, h2, y1, y2, t1, t2, V, sig2):
    """``F``, gradient ``(g1, g2)`` and Hessian ``(H11, H12, H22)`` of the bracket in ``h``."""
    u1 = h1 * (h1 - h2)
    u2 = h2 * (h2 - h1)
    L1, d1, dd1 = loss_terms(u1, t1, sig2)
    L2, d2, dd2 = loss_terms(u2, t2, sig2)
    a1, b1 = 2.0 * h1 - h2, -h1          # grad u1
    a2, b2 = -h2, 2.0 * h2 - h1          # grad u2
    iv = 1.0 / V
    F = ((h1 - y1) ** 2 + (h2 - y2) ** 2) * 0.5 * iv + L1 + L2
    g1 = (h1 - y1) * iv + d1 * a1 + d2 * a2
    g2 = (h2 - y2) * iv + d1 * b1 + d2 * b2
    H11 = iv + dd1 * a1 * a1 + dd2 * a2 * a2 + 2.0 * d1
    H12 = dd1 * a1 * b1 + dd2 * a2 * b2 - d1 - d2
    H22 = iv + dd1 * b1 * b1 + dd2 * b2 * b2 + 2.0 * d2
    return F, g1, g2, H11, H12, H22


def targets(hs1, hs2, p: Params):
    """Target diagonal ``t_i = (1 - omega) s(u*_i) + omega A_ii`` (numpy, vectorised)."""
    us1 = hs1 * (hs1 - hs2)
    us2 = hs2 * (hs2 - hs1)
    e1 = 0.5 * (1.0 + np.tanh(0.5 * us1))
    e2 = 0.5 * (1.0 + np.tanh(0.5 * us2))
    return (1 - p.omega) * e1 + p.omega * p.a11, (1 - p.omega) * e2 + p.omega * p.a22


def target_gradients(hs1, hs2, p: Params):
    """``dt_i / dh*_k`` as four arrays ``(dt1/dh1, dt1/dh2, dt2/dh1, dt2/dh2)``."""
    us1 = hs1 * (hs1 - hs2)
    us2 = hs2 * (hs2 - hs1)
    e1 = 0.5 * (1.0 + np.tanh(0.5 * us1))
    e2 = 0.5 * (1.0 + np.tanh(0.5 * us2))
    c1 = (1 - p.omega) * e1 * (1 - e1)
    c2 = (1 - p.omega) * e2 * (1 - e2)
    return c1 * (2 * hs1 - hs2), c1 * (-hs1), c2 * (-hs2), c2 * (2 * hs2 - hs1)


def student_diagonal(h1, h2):
    """``S_11, S_22`` of the student attention (numpy)."""
    return 0.5 * (1.0 + np.tanh(0.5 * h1 * (h1 - h2))), 0.5 * (1.0 + np.tanh(0.5 * h2 * (h2 - h1)))


def loss_np(h1, h2, t1, t2, sig2):
    S1, S2 = student_diagonal(h1, h2)
    return sig2 * ((t1 - S1) ** 2 + (t2 - S2) ** 2)


# ----------------------------------------------------------------------------- the entropic side
def entropic(xhat, p: Params):
    """Order parameters from conjugates, docs/explanation/theory.md §6 (l2, ``Sigma = sigma^2 I``, ``rho = sigma^2``)."""
    qh, Vh, mh, th = xhat
    s2 = p.sig2
    den = p.lam + s2 * Vh
    q = s2 * (s2 * qh + mh ** 2 + s2 ** 2 * th ** 2) / den ** 2
    return np.array([q, s2 / den, mh / den, s2 ** 2 * th / den])


def psi_w(xhat, p: Params) -> float:
    qh, Vh, mh, th = xhat
    s2 = p.sig2
    return 0.5 * (s2 * qh + mh ** 2 + s2 ** 2 * th ** 2) / (p.lam + s2 * Vh)


def psi_t(x, xhat) -> float:
    q, V, m, th = x
    qh, Vh, mh, thh = xhat
    return 0.5 * Vh * q - 0.5 * qh * V - m * mh - th * thh


def conjugates(dpsi, alpha):
    """``xhat`` from ``dPsi_y/dx`` (docs/explanation/theory.md §4, aggregated over the two tokens)."""
    dq, dV, dm, dth = dpsi
    return np.array([2 * alpha * dV, -2 * alpha * dq, alpha * dm, alpha * dth])


def admissible(x, p: Params) -> bool:
    q, V, m, th = x
    return bool(np.all(np.isfinite(x)) and q > 0 and V > 0 and p.rho - th * th / q > 0)

"""Bayes-optimal GLM references, written by hand from the literature (Barbier, Krzakala, Macris, Miolane,
Zdeborova, PNAS 2019), with scipy's adaptive quadrature: nothing here imports :mod:`replica`.

One teacher field, ``rho = E w*^2``::

    Phi(q, qhat) = -1/2 q qhat + psi_P0(qhat) + alpha Psi_out(q)
    psi_P0(A)    = E_{w* ~ P0, xi} log int dP0(w) exp(B w - A w^2 / 2),   B = A w* + sqrt(A) xi
    Psi_out(q)   = E_xi sum_y Z log Z,   Z = Z_out(y; sqrt(q) xi, rho - q)
    q = E f_a^2 (f_a the posterior mean),   qhat = alpha E_xi sum_y (d_omega Z)^2 / Z

* sign channel ``y = sign(h*)``: ``Z(y) = Phi(y omega / sqrt V)``,
  ``sum_y (d Z)^2 / Z = phi(x)^2 / (V Phi(x) Phi(-x))`` with ``x = omega / sqrt V``;
* Gaussian channel ``y = h* + sqrt(Delta) z``: ``Z = N(y; omega, V + Delta)``, ``qhat = alpha / (V + Delta)``,
  ``Psi_out = -1/2 log(2 pi e (V + Delta))``;
* Gaussian prior ``N(0, 1)``: ``psi = (A - log(1 + A)) / 2``, ``q = A / (1 + A)``;
* +-1 prior: ``psi = -A/2 + E log cosh(A + sqrt(A) xi)``, ``q = E tanh(A + sqrt(A) xi)^2``.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import integrate, optimize
from scipy.special import log_ndtr, ndtr

SQRT2PI = math.sqrt(2.0 * math.pi)


def phi(x):
    return np.exp(-0.5 * x * x) / SQRT2PI


def gauss_mean(f: Callable[[float], float], cut: float = 40.0) -> float:
    """``E_{z ~ N(0,1)} f(z)`` by adaptive quadrature (split at 0)."""
    val, _ = integrate.quad(lambda z: phi(z) * f(z), -cut, cut, epsabs=1e-15, epsrel=1e-13, limit=2000, points=[0.0])
    return val


# --------------------------------------------------------------------------- the sign channel
def sign_qhat1(q: float, rho: float = 1.0) -> float:
    """``E_xi sum_y (d_omega Z)^2 / Z`` of the sign channel (``qhat / alpha``)."""
    V = rho - q
    a = math.sqrt(q / V)
    return gauss_mean(lambda z: math.exp(-(a * z) ** 2 - math.log(2 * math.pi) - log_ndtr(a * z) - log_ndtr(-a * z))) / V


def sign_psi_out(q: float, rho: float = 1.0) -> float:
    """``E_xi sum_y Z log Z`` of the sign channel."""
    a = math.sqrt(q / (rho - q))
    return 2.0 * gauss_mean(lambda z: ndtr(a * z) * log_ndtr(a * z))


def gaussian_sign_perceptron(alpha: float) -> dict[str, float]:
    """The Gaussian-prior sign perceptron: ``q = qhat/(1 + qhat)``, ``qhat = alpha sign_qhat1(q)``, solved by
    Brent's method; the free entropy and the Bayes-optimal classification error ``arccos(sqrt q)/pi``."""
    def gap(q):
        A = alpha * sign_qhat1(q)
        return A / (1 + A) - q

    q = optimize.brentq(gap, 1e-12, 1 - 1e-12, xtol=1e-15, rtol=1e-15)
    A = alpha * sign_qhat1(q)
    phi_ = -0.5 * q * A + 0.5 * (A - math.log1p(A)) + alpha * sign_psi_out(q)
    return {"q": q, "qhat": A, "free_entropy": phi_, "classification_error": math.acos(math.sqrt(q)) / math.pi}


# --------------------------------------------------------------------------- +-1 prior
def rademacher_psi(A: float) -> float:
    """``psi_P0(A)`` of the +-1 prior."""
    s = math.sqrt(A)
    return -A / 2 + gauss_mean(lambda z: np.logaddexp(A + s * z, -(A + s * z)) - math.log(2.0))


def rademacher_q(A: float) -> float:
    """``E f_a^2`` of the +-1 prior (``f_a = tanh B``)."""
    s = math.sqrt(A)
    return gauss_mean(lambda z: math.tanh(A + s * z) ** 2)


def binary_perceptron_free_entropy(alpha: float) -> tuple[float, float]:
    """``(Phi, q)`` of the uninformed fixed point of the +-1 sign perceptron (iterated from ``q = 1e-6``)."""
    q = 1e-6
    for _ in range(5000):
        q_new = rademacher_q(alpha * sign_qhat1(q))
        if abs(q_new - q) < 1e-13:
            q = q_new
            break
        q = q_new
    A = alpha * sign_qhat1(q)
    return -0.5 * q * A + rademacher_psi(A) + alpha * sign_psi_out(q), q


def binary_perceptron_alpha_it() -> float:
    """Where the uninformed free entropy reaches ``-log 2``, that of perfect recovery (the informed branch)."""
    return optimize.brentq(lambda a: binary_perceptron_free_entropy(a)[0] + math.log(2.0), 1.2, 1.3, xtol=1e-10)


def binary_perceptron_alpha_alg() -> float:
    """The spinodal of the uninformed branch: the maximum of ``alpha(q) = A(q) / sign_qhat1(q)`` with ``A(q)``
    the inverse of ``rademacher_q``, over ``q`` in (0.8, 0.95)."""
    def A_of(q):
        return math.exp(optimize.brentq(lambda u: rademacher_q(math.exp(u)) - q, -10, 6, xtol=1e-14))

    res = optimize.minimize_scalar(lambda q: -A_of(q) / sign_qhat1(q), bounds=(0.8, 0.97), method="bounded",
                                   options={"xatol": 1e-10})
    return -res.fun


# --------------------------------------------------------------------------- generic priors (quadrature)
def prior_psi(density: Callable[[np.ndarray], np.ndarray] | None, A: float, pieces=(), atoms=(),
              nodes: int = 40, panels: int = 400) -> tuple[float, float]:
    """``(psi_P0(A), E f_a^2)`` of a prior with a density on the intervals ``pieces`` (a composite Gauss-Legendre
    rule of ``nodes`` points on each of 8 panels per interval) plus point masses ``atoms`` (``(value, weight)``;
    the density normalised to ``1 - sum of weights``).

    With ``B = A w* + sqrt(A) xi`` the law of ``B`` is ``p(B) = phi(B / sqrt A) / sqrt A * Z_0(B)`` (integrate
    ``w*`` against the Gaussian of ``xi``: the exponent is the one of ``Z_0``), so
    ``psi = int dB p(B) log Z_0(B)`` and ``E f_a^2 = int dB p(B) (Z_1 / Z_0)^2``: one integral over ``B``
    (``panels`` panels of 16 Gauss-Legendre points) of ``Z_0``, ``Z_1 = int dP0(w) w exp(...)`` on the rule
    of ``w`` (log-sum-exp)."""
    values, weights = [a for a, _ in atoms], [w for _, w in atoms]
    if density is not None:
        gx, gw = np.polynomial.legendre.leggauss(nodes)
        pts, wts = [], []
        for lo, hi in pieces:
            edges = np.linspace(lo, hi, 9)
            for a, b in zip(edges[:-1], edges[1:]):
                pts.append((a + b) / 2 + (b - a) / 2 * gx)
                wts.append((b - a) / 2 * gw)
        pts, wts = np.concatenate(pts), np.concatenate(wts)
        dens = wts * density(pts)
        dens *= (1 - sum(weights)) / dens.sum()
        values += list(pts)
        weights += list(dens)
    w = np.array(values)
    logc = np.log(np.array(weights))
    s = math.sqrt(A)
    bmax = A * np.max(np.abs(w)) + 14 * s
    gx, gw = np.polynomial.legendre.leggauss(16)
    edges = np.linspace(-bmax, bmax, panels + 1)
    B = ((edges[:-1] + edges[1:])[:, None] / 2 + np.diff(edges)[:, None] / 2 * gx).ravel()
    wB = (np.diff(edges)[:, None] / 2 * gw).ravel()
    psi = q = 0.0
    for chunk in np.array_split(np.arange(B.size), max(1, B.size // 512)):
        b = B[chunk]
        expo = logc[None, :] + b[:, None] * w[None, :] - A * w[None, :] ** 2 / 2
        top = expo.max(axis=1, keepdims=True)
        e = np.exp(expo - top)
        logZ = top[:, 0] + np.log(e.sum(axis=1))
        fa = (e * w).sum(axis=1) / e.sum(axis=1)
        pB = np.exp(-0.5 * b * b / A + logZ) / (SQRT2PI * s)
        psi += float((wB[chunk] * pB) @ logZ)
        q += float((wB[chunk] * pB) @ fa ** 2)
    return psi, q

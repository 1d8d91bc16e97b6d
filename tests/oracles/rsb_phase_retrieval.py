"""A zero-temperature 1RSB of phase retrieval written by hand: the oracle of tests/test_rsb.py.

Nothing here imports :mod:`replica`. The problem: teacher field ``h* ~ N(0, 1)``, label ``y = |h*|``, loss
``(y - |h|)^2``, penalty ``lam/2 |w|^2``. Its Moreau envelope is closed form,

    M(omega, y) = min_h [(h - omega)^2 / (2 dq) + (y - |h|)^2] = (y - |omega|)^2 / (1 + 2 dq)     (y >= 0),

and so is the inner Gaussian average ``I = E_zeta exp(-m M(a + s zeta, y))`` (two Gaussian integrals over
half-lines, ``a`` the outer centre, ``s^2 = q1 - q0``):

    I = sum_{mu = +a, -a} exp(-c (mu - y)^2 / (1 + 2 c s^2)) / sqrt(1 + 2 c s^2) * Phi(mu' / s'),
    c = m / (1 + 2 dq),   mu' = (mu + 2 c s^2 y) / (1 + 2 c s^2),   s'^2 = s^2 / (1 + 2 c s^2).

The free entropy (docs/how-to/rsb.md) is ``Phi = Psi_t + Psi_w + alpha Psi_y`` with

    Psi_t = Vh q1 / 2 - q1h dq / 2 - m (q1h q1 - q0h q0) / 2 - thh th,
    Psi_w = -log(B / A) / (2 m) + (q0h + thh^2) / (2 B),    A = lam + Vh,   B = A - m (q1h - q0h),
    Psi_y = (1/m) E log I,   a = sqrt(q0) xi,   h* = th / sqrt(q0) xi + sqrt(1 - th^2 / q0) eta.

The outer average is taken over ``(a, t = h*)``: the integrand is even in both and smooth in ``t > 0``
(``y = t``), so ``E = 2 int_0^inf phi(t) E_{a | t} log I dt`` with ``a | t ~ N(th t, q0 - th^2)``,
composite Gauss--Legendre in ``t`` and Gauss--Hermite in ``a``. On the uninformative branch with
uncorrelated states (``th = q0 = 0``) the outer average is one-dimensional. The derivatives of ``Psi_w``
are written out; those of ``Psi_y`` are central differences with Richardson extrapolation (an error
~1e-10 of the potential's scale).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import root
from scipy.special import log_ndtr

_T_NODES, _T_WEIGHTS = None, None


def _t_rule(cut: float = 12.0, panels: int = 24, order: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss--Legendre on ``[0, cut]`` with the weight ``2 phi(t)`` (the half-line of ``|h*|``)."""
    x, w = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(0.0, cut, panels + 1)
    a, b = edges[:-1, None], edges[1:, None]
    t = (0.5 * (a + b) + 0.5 * (b - a) * x).ravel()
    wt = (0.5 * (b - a) * w).ravel() * 2.0 * np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return t, wt


def log_inner(a: np.ndarray, y: np.ndarray, s2: float, c: float) -> np.ndarray:
    """``log E_zeta exp(-c (y - |a + s zeta|)^2)`` in closed form (module docstring), stably."""
    k = 1.0 + 2.0 * c * s2
    out = []
    for mu in (a, -a):
        expo = -c * (mu - y) ** 2 / k - 0.5 * math.log(k)
        if s2 > 0:
            arg = (mu + 2.0 * c * s2 * y) / math.sqrt(k) / math.sqrt(s2)
            expo = expo + log_ndtr(arg)
        else:  # s = 0: the half-line u > 0 holds all the mass when mu > 0
            expo = expo + np.where(mu > 0, 0.0, np.where(mu < 0, -np.inf, math.log(0.5)))
        out.append(expo)
    return np.logaddexp(out[0], out[1])


def psi_y(q0: float, q1: float, dq: float, th: float, m: float, outer: int = 60) -> float:
    """``Psi_y`` (module docstring)."""
    t, wt = _t_rule()
    c = m / (1.0 + 2.0 * dq)
    s2 = q1 - q0
    if q0 <= 0:
        return float(wt @ log_inner(np.zeros_like(t), t, s2, c)) / m
    x, w = np.polynomial.hermite_e.hermegauss(outer)
    w = w / math.sqrt(2.0 * math.pi)
    sd = math.sqrt(max(q0 - th * th, 0.0))
    a = th * t[:, None] + sd * x[None, :]
    vals = log_inner(a, t[:, None], s2, c)
    return float(wt @ (vals @ w)) / m


def psi_w(q0h: float, q1h: float, vh: float, thh: float, m: float, lam: float) -> float:
    A = lam + vh
    B = A - m * (q1h - q0h)
    return -math.log(B / A) / (2.0 * m) + (q0h + thh * thh) / (2.0 * B)


def phi(v: dict, alpha: float, lam: float) -> float:
    """The 1RSB free entropy at ``v`` (keys ``q0 q1 dq th m q0h q1h vh thh``)."""
    t = v["vh"] * v["q1"] / 2 - v["q1h"] * v["dq"] / 2 - v["m"] * (v["q1h"] * v["q1"] - v["q0h"] * v["q0"]) / 2 \
        - v["thh"] * v["th"]
    return t + psi_w(v["q0h"], v["q1h"], v["vh"], v["thh"], v["m"], lam) \
        + alpha * psi_y(v["q0"], v["q1"], v["dq"], v["th"], v["m"])


def _diff(f, x: float, h: float) -> float:
    """Central difference with one Richardson step."""
    d1 = (f(x + h) - f(x - h)) / (2 * h)
    d2 = (f(x + h / 2) - f(x - h / 2)) / h
    return (4 * d2 - d1) / 3


def uncorrelated(alpha: float, lam: float, start: dict) -> dict:
    """The 1RSB point with ``q0 = th = 0`` (uncorrelated states, the uninformative branch): stationarity
    of ``Phi`` in ``q1, dq, m, q1h, vh`` with ``Sigma = -m^2 dPhi/dm = 0``, solved from ``start``."""
    def equations(u):
        q1, dq, m, q1h, vh = u
        A, B = lam + vh, lam + vh - m * q1h
        if not (q1 > 0 and dq > 0 and m > 0 and B > 0 and A > 0):
            return np.full(5, 1e3)
        py = lambda **k: psi_y(0.0, k.get("q1", q1), k.get("dq", dq), 0.0, k.get("m", m))  # noqa: E731
        d_q1 = _diff(lambda z: py(q1=z), q1, 1e-4 * q1)
        d_dq = _diff(lambda z: py(dq=z), dq, 1e-4 * dq)
        d_m = _diff(lambda z: py(m=z), m, 1e-4 * m)
        dw_dm = math.log(B / A) / (2 * m * m) + q1h / (2 * m * B)
        return np.array([
            q1 - (1.0 / B - 1.0 / A) / m,                 # dPhi/dVh = 0
            dq - 1.0 / A,                                # dPhi/dq1h = 0 (with the line above)
            vh / 2 - m * q1h / 2 + alpha * d_q1,         # dPhi/dq1 = 0
            -q1h / 2 + alpha * d_dq,                     # dPhi/d dq = 0
            -q1h * q1 / 2 + dw_dm + alpha * d_m,         # dPhi/dm = 0: Sigma = 0
        ])

    u0 = np.array([start[k] for k in ("q1", "dq", "m", "q1h", "vh")], dtype=float)
    sol = root(equations, u0, method="hybr", options=dict(xtol=1e-13))
    q1, dq, m, q1h, vh = sol.x
    v = dict(q0=0.0, q1=q1, dq=dq, th=0.0, m=m, q0h=0.0, q1h=q1h, vh=vh, thh=0.0)
    v["phi"] = phi(v, alpha, lam)
    v["residual"] = float(np.max(np.abs(equations(sol.x))))
    return v


def replica_symmetric(alpha: float, lam: float) -> dict:
    """The replica-symmetric point on the uninformative branch (``theta = 0``) in closed form.

    At ``q1 = q0 = q`` the inner average is trivial and ``Psi_y = -E M(sqrt(q) xi, |h*|)``; with ``theta = 0``
    ``|h*|`` and ``sqrt(q) |xi|`` are independent, ``E |h*| = sqrt(2/pi)``, so
    ``Psi_y = -(1 + q - (4/pi) sqrt(q)) / (1 + 2 V)``. Stationarity: ``q = qhat / (lam + Vhat)^2``,
    ``V = 1 / (lam + Vhat)``, ``Vhat = -2 alpha dPsi_y/dq = 2 alpha (1 - 2 / (pi sqrt q)) / (1 + 2 V)``,
    ``qhat = 2 alpha dPsi_y/dV = 4 alpha (1 + q - (4/pi) sqrt q) / (1 + 2 V)^2``, solved by Newton."""
    def equations(u):
        q, V = u
        vh = 2 * alpha * (1 - 2 / (math.pi * math.sqrt(q))) / (1 + 2 * V)
        qh = 4 * alpha * (1 + q - 4 / math.pi * math.sqrt(q)) / (1 + 2 * V) ** 2
        return np.array([q * (lam + vh) ** 2 - qh, V * (lam + vh) - 1.0])

    sol = root(equations, np.array([2.0, 5.0]), method="hybr", options=dict(xtol=1e-15))
    q, V = sol.x
    vh = 2 * alpha * (1 - 2 / (math.pi * math.sqrt(q))) / (1 + 2 * V)
    qh = 4 * alpha * (1 + q - 4 / math.pi * math.sqrt(q)) / (1 + 2 * V) ** 2
    py = -(1 + q - 4 / math.pi * math.sqrt(q)) / (1 + 2 * V)
    phi = vh * q / 2 - qh * V / 2 + qh / (2 * (lam + vh)) + alpha * py
    return dict(q=q, V=V, qh=qh, vh=vh, phi=phi, residual=float(np.max(np.abs(equations(sol.x)))))

"""Shared pieces of the hand-written GLM oracles: Gaussian helpers, the zero-temperature free
entropy in the toolkit's conventions, the ℓ2 entropic side, and a tight fixed-point solve.

Conventions (docs/explanation/theory.md §3–5 with ``L = 1, r = r_t = 1, σ = 1, m = 0``, ``ρ = 1``)::

    Φ   = extr  Ψ_t + Ψ_w + α Ψ_y
    Ψ_t = ½ V̂ q − ½ q̂ V − θ̂ θ
    Ψ_w = −E_{τ,ξ} min_w [ r(w) + ½ V̂ w² − w (θ̂ τ + √q̂ ξ) ]          τ, ξ ~ N(0, 1)
    Ψ_y = −E_{ξ,η,noise} min_h [ (h − ω)² / (2V) + ℓ(y, h) ]
          ω = √q ξ,  h* = θ ξ / √q + √(ρ − θ²/q) η,  y = teacher(h*, noise)

    q = −2 ∂Ψ_w/∂V̂    V = 2 ∂Ψ_w/∂q̂    θ = ∂Ψ_w/∂θ̂
    V̂ = −2α ∂Ψ_y/∂q   q̂ = 2α ∂Ψ_y/∂V   θ̂ = α ∂Ψ_y/∂θ

and the training loss per ``d`` (penalty included) is ``−Φ``.

Nothing here imports :mod:`replica`: these are the independent references.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import optimize

SQRT2 = math.sqrt(2.0)
SQRT2PI = math.sqrt(2.0 * math.pi)
RHO = 1.0  # teacher second moment E h*² (h* ~ N(0, 1))

#: Quadrature tolerances of every adaptive integral in the oracles.
EPSABS = 1e-15
EPSREL = 1e-13
#: Tolerance of the fixed-point solve (on the transformed unknowns, see :func:`solve_fixed_point`).
XTOL = 1e-14


def npdf(x: float) -> float:
    """Standard normal density."""
    return math.exp(-0.5 * x * x) / SQRT2PI


def ncdf(x: float) -> float:
    """Standard normal distribution function, accurate in both tails (erfc)."""
    return 0.5 * math.erfc(-x / SQRT2)


def nsf(x: float) -> float:
    """Standard normal upper tail ``P(Z > x)``."""
    return 0.5 * math.erfc(x / SQRT2)


def trace_potential(q: float, V: float, theta: float, qhat: float, Vhat: float, thetahat: float) -> float:
    """``Ψ_t = ½ V̂ q − ½ q̂ V − θ̂ θ``."""
    return 0.5 * Vhat * q - 0.5 * qhat * V - thetahat * theta


def free_entropy(alpha: float, x, psi_w: Callable[[float, float, float], float],
                 psi_y: Callable[[float, float, float], float]) -> float:
    """``Ψ_t + Ψ_w(q̂, V̂, θ̂) + α Ψ_y(q, V, θ)`` at an arbitrary ``x = (q, V, θ, q̂, V̂, θ̂)``
    (not only at the fixed point: the stationarity tests differentiate it)."""
    q, V, theta, qhat, Vhat, thetahat = x
    return trace_potential(q, V, theta, qhat, Vhat, thetahat) + psi_w(qhat, Vhat, thetahat) + alpha * psi_y(q, V, theta)


# --- ℓ2 penalty (λ/2) w², closed form of the entropic side ------------------------------------------------

def l2_entropic_potential(lam: float, qhat: float, Vhat: float, thetahat: float) -> float:
    """``Ψ_w = ½ (q̂ + θ̂²) / (λ + V̂)`` (ρ = 1)."""
    return 0.5 * (qhat + thetahat ** 2) / (lam + Vhat)


def l2_entropic_map(lam: float, qhat: float, Vhat: float, thetahat: float) -> tuple[float, float, float]:
    """``q = (q̂ + θ̂²)/(λ + V̂)²,  V = 1/(λ + V̂),  θ = θ̂/(λ + V̂)``."""
    V = 1.0 / (lam + Vhat)
    return (qhat + thetahat ** 2) * V * V, V, thetahat * V


# --- the fixed point -------------------------------------------------------------------------------------

def _to_x(q: float, V: float, theta: float) -> np.ndarray:
    # q, V > 0 by construction; the cosine θ/√(ρq) kept as is (not artanh of it): fixed points can sit
    # within 1e-14 of |cosine| = 1 (noiseless, tiny penalty), where artanh would lose every digit
    return np.array([math.log(q), math.log(V), theta / math.sqrt(RHO * q)])


def _from_x(x: np.ndarray) -> tuple[float, float, float]:
    q, V = math.exp(x[0]), math.exp(x[1])
    if abs(x[2]) > 1.0:
        raise ValueError("inadmissible state: theta^2 > rho q")
    return q, V, math.sqrt(RHO * q) * x[2]


def solve_fixed_point(
    fixed_point_map: Callable[[float, float, float], tuple[float, float, float]],
    start: tuple[float, float, float],
    damping: float = 0.5,
    warmup: int = 400,
) -> tuple[tuple[float, float, float], float]:
    """Solve ``(q, V, θ) = map(q, V, θ)`` to ``XTOL`` and return the state and its residual.

    ``map`` is the composition energetic → conjugates → entropic. Damped iteration first
    (robust, linear), then Powell's hybrid method (``scipy.optimize.root``, ``hybr``) on
    ``x − T(map(T⁻¹ x))`` in coordinates ``x = (log q, log V, θ/√(ρq))`` (a trial point with
    ``|θ| > √(ρq)`` is inadmissible and gets a large residual; the map's output never is). The returned residual is the max relative change of
    ``(q, V, θ)`` under one more application of the map.
    """

    def residual(x: np.ndarray) -> np.ndarray:
        try:
            y = _to_x(*fixed_point_map(*_from_x(x)))
        except (ValueError, OverflowError, ZeroDivisionError):
            return np.full(3, 1e6)
        if not np.all(np.isfinite(y)):
            return np.full(3, 1e6)
        return y - x

    def damped(x: np.ndarray, steps: int, rate: float) -> np.ndarray:
        for _ in range(steps):
            r = residual(x)
            if np.max(np.abs(r)) < 1e-6 or np.max(np.abs(r)) >= 1e6:
                break
            x = x + rate * r
        return x

    x = damped(_to_x(*start), warmup, damping)
    for attempt in range(4):
        sol = optimize.root(residual, x, method="hybr", options={"xtol": XTOL, "maxfev": 2000})
        if np.max(np.abs(residual(sol.x))) < 1e-11:  # hybr may report "no progress" at machine precision
            break
        # Newton wandered off (or stalled): more damped steps from the last admissible point
        x = damped(x, 4 * warmup, damping / (2 ** (attempt + 1)))
    else:
        raise RuntimeError(f"fixed point not found from {start}: {sol.message}")
    state = _from_x(sol.x)
    new = fixed_point_map(*state)
    res = max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(new, state) if b != 0.0)
    return new, res


def finite_difference_gradient(f: Callable[[np.ndarray], float], x: np.ndarray, rel_step: float = 1e-5) -> np.ndarray:
    """Central differences with relative steps (truncation ~ step², noise ~ ε_f / step)."""
    x = np.asarray(x, dtype=float)
    g = np.empty_like(x)
    for i in range(x.size):
        h = rel_step * max(abs(x[i]), 1e-3)
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g

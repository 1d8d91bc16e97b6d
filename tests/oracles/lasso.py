"""LASSO state evolution (Bayati & Montanari, IEEE Trans. Inf. Theory 58, 1997 (2012)) in the
toolkit's replica conventions, every average in closed form (erfc).

Model: ``y = h* + √Δ z``, ``ℓ(y, h) = ½ (y − h)²``, ``r(w) = λ₁ |w|``, teacher weights
``w*_i ~ N(0, 1)`` (dense: ``h* = w*·x/√d ~ N(0, ρ = 1)``).

Energetic side: the square loss's, see :mod:`tests.oracles.ridge` (``V̂ = θ̂ = α/(1 + V)``,
``q̂ = α (ρ + Δ − 2θ + q)/(1 + V)²``).

Entropic side: ``b = θ̂ τ + √q̂ ξ ~ N(0, s²)``, ``s² = q̂ + θ̂²``; the minimiser is soft
thresholding ``ŵ = sign(b) (|b| − λ₁)₊ / V̂``, the minimum ``−(|b| − λ₁)₊² / (2V̂)``. With
``κ = λ₁/s`` and ``Q(κ) = P(Z > κ) = ½ erfc(κ/√2)``::

    E (|b| − λ₁)₊² = 2 [ (s² + λ₁²) Q(κ) − λ₁ s φ(κ) ]
    E (|b| − λ₁)₊  = 2 [ s φ(κ) − λ₁ Q(κ) ]
    Ψ_w = E (|b| − λ₁)₊² / (2 V̂)
    q   = −2 ∂Ψ_w/∂V̂ = E (|b| − λ₁)₊² / V̂²
    V   =  2 ∂Ψ_w/∂q̂ = 2 Q(κ) / V̂                 (Stein: ∂_{s²} E g(b) = ½ E g''(b))
    θ   =    ∂Ψ_w/∂θ̂ = θ̂ · 2 Q(κ) / V̂ = θ̂ V
    zero fraction  = P(ŵ = 0) = 1 − 2 Q(κ) = erf(κ/√2)
    E |ŵ| = E (|b| − λ₁)₊ / V̂

In Bayati–Montanari's form (θ̂ = V̂ here): ``ŵ = η(w* + τ Z; λ₁(1 + V)/α)`` with
``τ² = q̂/V̂² = (Δ + E(ŵ − w*)²)/α``, the effective noise, and ``V = s/(α − s)`` with
``s = 1 − zero fraction``, their calibration of the threshold.

Training loss per ``d`` (penalty included) ``e_t = −Φ``; directly,
``e_t = α E ℓ(y, prox) + λ₁ E|ŵ| = α (ρ + Δ − 2θ + q) / (2(1 + V)²) + λ₁ E|ŵ|``.
Test error ``ε_g = ½ (ρ − 2θ + q + Δ)`` (test MSE of a fresh noisy label, as for ridge).
"""
from __future__ import annotations

import math

from .common import RHO, SQRT2, free_entropy, npdf, nsf, solve_fixed_point, trace_potential
from .ridge import square_loss_energetic


def soft_threshold_moments(lam1: float, qhat: float, Vhat: float, thetahat: float) -> dict[str, float]:
    """The entropic side of ``λ₁|w|``: ``Ψ_w, q, V, θ``, zero fraction and ``E|ŵ|``."""
    s = math.sqrt(qhat + thetahat ** 2)
    kappa = lam1 / s
    tail = nsf(kappa)
    m2 = 2.0 * ((s * s + lam1 * lam1) * tail - lam1 * s * npdf(kappa))  # E (|b| − λ₁)₊²
    m1 = 2.0 * (s * npdf(kappa) - lam1 * tail)  # E (|b| − λ₁)₊
    V = 2.0 * tail / Vhat
    return {
        "psi_w": m2 / (2.0 * Vhat),
        "q": m2 / Vhat ** 2,
        "V": V,
        "theta": thetahat * V,
        "zero_fraction": math.erf(kappa / SQRT2),
        "mean_abs_w": m1 / Vhat,
    }


def _assemble(alpha: float, lam1: float, delta: float, q: float, V: float, theta: float) -> dict[str, float]:
    e = square_loss_energetic(alpha, delta, q, V, theta)
    qhat, Vhat, thetahat = e["qhat"], e["Vhat"], e["thetahat"]
    w = soft_threshold_moments(lam1, qhat, Vhat, thetahat)
    psi_t = trace_potential(q, V, theta, qhat, Vhat, thetahat)
    phi = psi_t + w["psi_w"] + alpha * e["psi_y"]
    eps_g = 0.5 * (RHO - 2.0 * theta + q + delta)
    direct = alpha * (RHO + delta - 2.0 * theta + q) / (2.0 * (1.0 + V) ** 2) + lam1 * w["mean_abs_w"]
    return {
        "q": q, "V": V, "theta": theta, "qhat": qhat, "Vhat": Vhat, "thetahat": thetahat,
        "psi_t": psi_t, "psi_w": w["psi_w"], "psi_y": e["psi_y"], "phi": phi, "train_loss": -phi,
        "train_loss_direct": direct, "eps_g": eps_g, "test_mse": eps_g,
        "zero_fraction": w["zero_fraction"], "mean_abs_w": w["mean_abs_w"],
    }


def lasso_state_evolution(alpha: float, lam1: float, delta: float, start: tuple[float, float, float] | None = None
                          ) -> dict[str, float]:
    """LASSO fixed point (``λ₁ > 0``) to ``XTOL``."""

    def fixed_point_map(q: float, V: float, theta: float) -> tuple[float, float, float]:
        e = square_loss_energetic(alpha, delta, q, V, theta)
        w = soft_threshold_moments(lam1, e["qhat"], e["Vhat"], e["thetahat"])
        return w["q"], w["V"], w["theta"]

    state, res = solve_fixed_point(fixed_point_map, start or (0.5, 1.0, 0.5))
    return {**_assemble(alpha, lam1, delta, *state), "residual": res}


def lasso_free_entropy(alpha: float, lam1: float, delta: float, x) -> float:
    """``Ψ_t + Ψ_w + α Ψ_y`` at an arbitrary ``x = (q, V, θ, q̂, V̂, θ̂)``."""
    return free_entropy(alpha, x, lambda *h: soft_threshold_moments(lam1, *h)["psi_w"],
                        lambda *o: square_loss_energetic(alpha, delta, *o)["psi_y"])

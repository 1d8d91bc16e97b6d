"""Ridge regression: the random-matrix closed form and the state evolution, two independent oracles.

Model: ``y = h* + √Δ z``, ``ℓ(y, h) = ½ (y − h)²``, ``r(w) = (λ/2) w²``,
``R(w) = Σ_μ ℓ(y_μ, w·x_μ/√d) + Σ_i r(w_i)``, ``h* ~ N(0, ρ = 1)``, ``α = n/d``.

**Closed form (Marchenko–Pastur).** With ``F = XᵀX/d`` and ``b = α − 1 + λ``,

    g  = (1/d) tr (F + λ)⁻¹ = (−b + √(b² + 4λ)) / (2λ)
    T₂ = (1/d) tr (F + λ)⁻² = (g² + g) / (2λg + b)

and ``ŵ = (F + λ)⁻¹ (F w* + Xᵀ√Δ z/√d)`` gives

    V = g,   θ = 1 − λ g,   ‖ŵ − w*‖²/d = λ² T₂ + Δ (g − λ T₂),   q = ‖ŵ − w*‖²/d + 2θ − 1
    e_t = ½ [ λ (1 − λ g) + Δ (λ g + α − 1) ]          (R(ŵ)/d, from R_min = (λ/2) yᵀ(XXᵀ/d + λ)⁻¹ y)
    ε_g = ½ (ρ − 2θ + q + Δ) = ½ (‖ŵ − w*‖²/d + Δ)      (test MSE of a fresh noisy label,
                                                          derivations/ridge.py's ``eps_g``)

**State evolution (docs/explanation/theory.md §3–5).** The square loss's Moreau envelope is explicit,
``min_h (h − ω)²/(2V) + ½(y − h)² = (y − ω)² / (2(1 + V))``, so

    Ψ_y = −(ρ + Δ − 2θ + q) / (2 (1 + V))
    V̂ = α / (1 + V),   θ̂ = α / (1 + V),   q̂ = α (ρ + Δ − 2θ + q) / (1 + V)²

and the ℓ2 entropic side ``V = 1/(λ + V̂), θ = θ̂ V, q = (q̂ + θ̂²) V²``. The conjugates of
the closed form follow from the same energetic relations.
"""
from __future__ import annotations

import math

from .common import (RHO, free_entropy, l2_entropic_map, l2_entropic_potential, solve_fixed_point,
                     trace_potential)


def square_loss_energetic(alpha: float, delta: float, q: float, V: float, theta: float) -> dict[str, float]:
    """Square loss on ``y = h* + √Δ z``: ``Ψ_y`` and the conjugates ``q̂, V̂, θ̂`` (α included)."""
    err = RHO + delta - 2.0 * theta + q  # E (y − ω)²
    return {
        "psi_y": -err / (2.0 * (1.0 + V)),
        "Vhat": alpha / (1.0 + V),
        "thetahat": alpha / (1.0 + V),
        "qhat": alpha * err / (1.0 + V) ** 2,
    }


def _assemble(alpha: float, lam: float, delta: float, q: float, V: float, theta: float) -> dict[str, float]:
    e = square_loss_energetic(alpha, delta, q, V, theta)
    qhat, Vhat, thetahat = e["qhat"], e["Vhat"], e["thetahat"]
    psi_t = trace_potential(q, V, theta, qhat, Vhat, thetahat)
    psi_w = l2_entropic_potential(lam, qhat, Vhat, thetahat)
    phi = psi_t + psi_w + alpha * e["psi_y"]
    eps_g = 0.5 * (RHO - 2.0 * theta + q + delta)
    return {
        "q": q, "V": V, "theta": theta, "qhat": qhat, "Vhat": Vhat, "thetahat": thetahat,
        "psi_t": psi_t, "psi_w": psi_w, "psi_y": e["psi_y"], "phi": phi, "train_loss": -phi,
        "eps_g": eps_g, "test_mse": eps_g,
    }


def ridge_closed_form(alpha: float, lam: float, delta: float) -> dict[str, float]:
    """Random-matrix closed form (``λ > 0``); adds ``train_loss_rmt``, the direct formula for ``e_t``."""
    b = alpha - 1.0 + lam
    g = (-b + math.sqrt(b * b + 4.0 * lam)) / (2.0 * lam)
    if b > 0:  # the same root without cancellation when b ≫ λ
        g = 2.0 / (b + math.sqrt(b * b + 4.0 * lam))
    t2 = (g * g + g) / (2.0 * lam * g + b)
    theta = 1.0 - lam * g
    dist2 = lam ** 2 * RHO * t2 + delta * (g - lam * t2)
    q = dist2 + 2.0 * theta - RHO
    out = _assemble(alpha, lam, delta, q, g, theta)
    out["train_loss_rmt"] = 0.5 * (lam * RHO * (1.0 - lam * g) + delta * (lam * g + alpha - 1.0))
    return out


def ridge_state_evolution(alpha: float, lam: float, delta: float, start: tuple[float, float, float] | None = None
                          ) -> dict[str, float]:
    """Iterate the saddle-point equations to ``XTOL`` (no closed form used)."""

    def fixed_point_map(q: float, V: float, theta: float) -> tuple[float, float, float]:
        e = square_loss_energetic(alpha, delta, q, V, theta)
        return l2_entropic_map(lam, e["qhat"], e["Vhat"], e["thetahat"])

    state, res = solve_fixed_point(fixed_point_map, start or (1.0, 1.0, 0.5))
    return {**_assemble(alpha, lam, delta, *state), "residual": res}


def ridge_free_entropy(alpha: float, lam: float, delta: float, x) -> float:
    """``Ψ_t + Ψ_w + α Ψ_y`` at an arbitrary ``x = (q, V, θ, q̂, V̂, θ̂)`` (for stationarity tests)."""
    return free_entropy(alpha, x, lambda *h: l2_entropic_potential(lam, *h),
                        lambda *o: square_loss_energetic(alpha, delta, *o)["psi_y"])

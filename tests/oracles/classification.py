"""ℓ2-regularised classification on a sign or probit teacher: logistic, hinge (SVM), and the
square loss (a closed-form cross-check of the same machinery).

Model (Aubin, Krzakala, Lu, Zdeborová, NeurIPS 2020, "Generalization error in high-dimensional
perceptrons: approaching Bayes error with convex optimization", their ERM equations written in
the toolkit's conventions, see :mod:`tests.oracles.common`)::

    y = sign(h* + √Δ z)            (Δ = 0: the sign teacher; Δ > 0: the probit teacher)
    ℓ(y, h) = ℓ(y h):  logistic log(1 + e^{−yh}),  hinge max(0, 1 − yh),  square ½ (y − h)²
    r(w) = (λ/2) w²

**Teacher in the measure, not the integrand.** Given the student's centre ``ω = √q ξ`` the
label has ``P(y | ξ) = Φ(y a ξ)`` with

    a = θ / √D,   D = q (ρ + Δ) − θ²,   ∂a/∂θ = q (ρ + Δ) / D^{3/2},   ∂a/∂q = −θ (ρ + Δ) / (2 D^{3/2}),

so every derivative in ``θ`` falls on the smooth Gaussian weight, never on the label. Both
losses depend on ``y h`` only and both teachers are odd, hence the ``y = −1`` term equals the
``y = +1`` term at ``ξ → −ξ``: with ``M(ω) = min_h (h − ω)²/(2V) + ℓ(h)`` (the Moreau envelope
for ``y = +1``), ``P(ω)`` its minimiser and ``f = (P − ω)/V = −ℓ'(P)``::

    Ψ_y = −2 I_M,        I_M  = ∫ Dξ Φ(aξ) M(√q ξ)
    q̂   = 2α ∂Ψ_y/∂V   = 2α I_ff,          I_ff = ∫ Dξ Φ(aξ) f²            (∂M/∂V = −f²/2)
    θ̂   =  α ∂Ψ_y/∂θ   = −2α (∂a/∂θ) I_θ,   I_θ  = ∫ Dξ φ(aξ) ξ M
    V̂   = −2α ∂Ψ_y/∂q  = 4α (∂a/∂q) I_θ − (2α/√q) I_ξf,   I_ξf = ∫ Dξ Φ(aξ) ξ f   (∂M/∂ω = −f)

with the ℓ2 entropic side ``V = 1/(λ + V̂), θ = θ̂ V, q = (q̂ + θ̂²) V²`` (ρ = 1). The GLM
literature's ``Z_out``/``f_out`` form of the conjugates (e.g. ``q̂ = α E f_out²``) is the
Gaussian integration by parts of these; here the derivatives are those of the very ``Ψ_y``
that is integrated, which the finite-difference tests check.

Proximal maps (``y = +1``):

* hinge: ``P = ω + V`` (ω < 1 − V), ``P = 1`` (1 − V ≤ ω ≤ 1), ``P = ω`` (ω > 1); hence
  ``M = 1 − ω − V/2``, ``(1 − ω)²/(2V)``, ``0`` and ``f = 1``, ``(1 − ω)/V``, ``0``: kinks at
  ``ω = 1 − V`` and ``ω = 1``, where the integrals are split.
* logistic: ``P = ω + V σ(−P)`` has no closed form, so the integrals run over ``P`` instead of
  ``ξ``: ``ω(P) = P − V σ(−P)`` is increasing (``dω/dP = 1 + V σ(P) σ(−P)``), every integrand
  is explicit in ``P``, and no root is solved inside the quadrature.
* square (cross-check only): ``M = (1 − ω)²/(2(1 + V))``, ``f = (1 − ω)/(1 + V)``, whose
  averages are closed forms: ``Ψ_y = −(ρ + q − 2θc)/(2(1 + V))``, ``c = √(2/(π(ρ + Δ)))``.

All integrals: ``scipy.integrate.quad`` on ``|ξ| ≤ 14`` (the Gaussian weight beyond is < 1e-42),
split at 0, ±1, ±3, ±6, ±10, ±1/a, ±3/a, ±10/a (the label weight ``Φ(aξ)`` becomes a step of
width ``1/a`` as ``θ² → q``) and at the loss's kinks; ``epsabs = 1e-15``, ``epsrel = 1e-13``.

Observables: ``classification_error = P(y ≠ sign h) = arccos(θ/√(q(ρ + Δ)))/π``; the test loss
``eps_g = E ℓ(y h) = 2 ∫ Dξ Φ(aξ) ℓ(√q ξ)`` (the toolkit's ``eps_g``: the loss at a fresh
sample, no prox); the training loss ``−Φ``, also computed directly as
``α E ℓ(y, P) + λ q / 2`` (``train_loss_direct``).
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

from scipy import integrate, optimize

from .common import (EPSABS, EPSREL, RHO, free_entropy, l2_entropic_map, l2_entropic_potential, ncdf, npdf,
                     solve_fixed_point, trace_potential)

XI_MAX = 14.0
_BASE_BREAKS = (0.0, 1.0, 3.0, 6.0, 10.0)
LOSSES = ("logistic", "hinge", "square")


def _sigm_neg(p: float) -> float:
    """σ(−p) = 1/(1 + e^p), without overflow."""
    if p >= 0:
        e = math.exp(-p)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(p))


def _softplus_neg(p: float) -> float:
    """log(1 + e^{−p}), without overflow."""
    if p >= 0:
        return math.log1p(math.exp(-p))
    return -p + math.log1p(math.exp(p))


def loss_value(loss: str, margin: float) -> float:
    """``ℓ`` as a function of the margin ``y h``."""
    if loss == "logistic":
        return _softplus_neg(margin)
    if loss == "hinge":
        return max(0.0, 1.0 - margin)
    if loss == "square":
        return 0.5 * (1.0 - margin) ** 2  # ½ (y − h)² = ½ (1 − y h)² for y = ±1
    raise ValueError(f"unknown loss {loss!r}")


def _envelope_explicit(loss: str, omega: float, V: float) -> tuple[float, float, float]:
    """``(M, f, ℓ(P))`` for the losses with a closed-form prox (y = +1)."""
    if loss == "hinge":
        if omega < 1.0 - V:
            return 1.0 - omega - 0.5 * V, 1.0, 1.0 - omega - V
        if omega <= 1.0:
            return (1.0 - omega) ** 2 / (2.0 * V), (1.0 - omega) / V, 0.0
        return 0.0, 0.0, 0.0
    if loss == "square":
        r = (1.0 - omega) / (1.0 + V)
        return 0.5 * (1.0 - omega) * r, r, 0.5 * r * r
    raise ValueError(loss)


def _logistic_prox(omega: float, V: float) -> float:
    """The logistic prox: the root of ``P − V σ(−P) = ω``, in ``[ω, ω + V]`` (bracket widened by 1
    so that rounding at the ends cannot hide the sign change)."""
    return optimize.brentq(lambda p: p - V * _sigm_neg(p) - omega, omega - 1.0, omega + V + 1.0, xtol=1e-15, rtol=1e-15,
                           maxiter=200)


class _Integrator:
    """The four envelope integrals and the observables at one ``(q, V, θ)``."""

    def __init__(self, loss: str, delta: float, q: float, V: float, theta: float):
        self.loss, self.delta, self.q, self.V, self.theta = loss, delta, q, V, theta
        self.sq = math.sqrt(q)
        self.D = q * (RHO + delta) - theta * theta
        if not (q > 0 and V > 0 and self.D > 0):
            raise ValueError(f"inadmissible state q={q}, V={V}, theta={theta}")
        self.a = theta / math.sqrt(self.D)
        self.error = 0.0  # sum of quad's error estimates (absolute, on the integrals)

    def _breaks(self, extra: tuple[float, ...] = ()) -> list[float]:
        pts = {-XI_MAX, XI_MAX}
        cand = list(_BASE_BREAKS) + list(extra)
        if self.a > 0:
            cand += [1.0 / self.a, 3.0 / self.a, 10.0 / self.a]
        for c in cand:
            for s in (c, -c):
                if -XI_MAX < s < XI_MAX:
                    pts.add(s)
        pts = sorted(pts)
        return [p for i, p in enumerate(pts) if i == 0 or p - pts[i - 1] > 1e-12]

    def _quad(self, fn: Callable[[float], float], lo: float, hi: float) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            val, err = integrate.quad(fn, lo, hi, epsabs=EPSABS, epsrel=EPSREL, limit=400)
        self.error += err
        return val

    def _segments(self):
        """Yield ``(u0, u1, chart)``: ``chart(u) -> (ξ, dξ/du, M, f, ℓ(P))``."""
        V, sq = self.V, self.sq
        if self.loss == "logistic":
            def chart(p: float):
                s = _sigm_neg(p)
                omega = p - V * s
                return omega / sq, (1.0 + V * s * (1.0 - s)) / sq, 0.5 * V * s * s + _softplus_neg(p), s, \
                    _softplus_neg(p)

            xs = self._breaks()
            ps = [_logistic_prox(sq * x, V) for x in xs]
            for p0, p1 in zip(ps[:-1], ps[1:]):
                yield p0, p1, chart
            return
        kinks = (1.0 - V, 1.0) if self.loss == "hinge" else ()
        xs = self._breaks(tuple(k / sq for k in kinks))
        if self.loss == "hinge":  # M = f = 0 beyond ω = 1
            xs = [x for x in xs if x < 1.0 / sq] + [min(1.0 / sq, XI_MAX)]

        def chart(x: float):
            M, f, lp = _envelope_explicit(self.loss, sq * x, V)
            return x, 1.0, M, f, lp

        for x0, x1 in zip(xs[:-1], xs[1:]):
            if x1 > x0:
                yield x0, x1, chart

    def envelope_integrals(self) -> dict[str, float]:
        a = self.a
        acc = {"I_M": 0.0, "I_ff": 0.0, "I_theta": 0.0, "I_xif": 0.0, "E_loss_prox": 0.0}
        for u0, u1, chart in self._segments():
            def w(u, k):
                x, jac, M, f, lp = chart(u)
                g = npdf(x) * jac
                if k == "I_theta":
                    return g * npdf(a * x) * x * M
                lab = ncdf(a * x)
                return g * lab * (M if k == "I_M" else f * f if k == "I_ff" else x * f if k == "I_xif" else lp)

            for k in acc:
                acc[k] += self._quad(lambda u, k=k: w(u, k), u0, u1)
        return acc

    def test_loss(self) -> float:
        """``E ℓ(y h)`` at a fresh sample: ``2 ∫ Dξ Φ(aξ) ℓ(√q ξ)`` (split at the hinge's kink)."""
        extra = (1.0 / self.sq,) if self.loss == "hinge" else ()
        xs = self._breaks(extra)
        total = 0.0
        for x0, x1 in zip(xs[:-1], xs[1:]):
            total += self._quad(lambda x: npdf(x) * ncdf(self.a * x) * loss_value(self.loss, self.sq * x), x0, x1)
        return 2.0 * total


def energetic(loss: str, alpha: float, delta: float, q: float, V: float, theta: float,
              with_observables: bool = False) -> dict[str, float]:
    """``Ψ_y`` and the conjugates ``q̂, V̂, θ̂`` (α included) by adaptive quadrature."""
    it = _Integrator(loss, delta, q, V, theta)
    I = it.envelope_integrals()
    D32 = it.D ** 1.5
    da_dtheta = q * (RHO + delta) / D32
    da_dq = -0.5 * theta * (RHO + delta) / D32
    out = {
        "psi_y": -2.0 * I["I_M"],
        "qhat": 2.0 * alpha * I["I_ff"],
        "thetahat": -2.0 * alpha * da_dtheta * I["I_theta"],
        "Vhat": 4.0 * alpha * da_dq * I["I_theta"] - 2.0 * alpha * I["I_xif"] / it.sq,
        "mean_loss_at_prox": 2.0 * I["E_loss_prox"],
    }
    if with_observables:
        out["eps_g"] = it.test_loss()
        out["test_loss"] = out["eps_g"]
    out["quadrature_error"] = it.error
    return out


def square_sign_closed_form(alpha: float, delta: float, q: float, V: float, theta: float) -> dict[str, float]:
    """The square loss on a sign/probit teacher in closed form (``E[y ω] = θ c``, ``c = √(2/(π(ρ+Δ)))``)."""
    c = math.sqrt(2.0 / (math.pi * (RHO + delta)))
    err = 1.0 - 2.0 * theta * c + q  # E (y − ω)², y² = 1
    return {"psi_y": -err / (2.0 * (1.0 + V)), "Vhat": alpha / (1.0 + V), "thetahat": alpha * c / (1.0 + V),
            "qhat": alpha * err / (1.0 + V) ** 2}


def classification_error(q: float, theta: float, delta: float = 0.0) -> float:
    """``P(sign(h* + √Δ z) ≠ sign h) = arccos(θ / √(q (ρ + Δ))) / π``."""
    return math.acos(max(-1.0, min(1.0, theta / math.sqrt(q * (RHO + delta))))) / math.pi


def classification_state_evolution(loss: str, alpha: float, lam: float, delta: float = 0.0,
                                   start: tuple[float, float, float] | None = None) -> dict[str, float]:
    """ℓ2 classification fixed point (``λ > 0``) to ``XTOL``, with Φ and the observables."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")

    def fixed_point_map(q: float, V: float, theta: float) -> tuple[float, float, float]:
        e = energetic(loss, alpha, delta, q, V, theta)
        return l2_entropic_map(lam, e["qhat"], e["Vhat"], e["thetahat"])

    (q, V, theta), res = solve_fixed_point(fixed_point_map, start or (1.0, 1.0, 0.5))
    e = energetic(loss, alpha, delta, q, V, theta, with_observables=True)
    qhat, Vhat, thetahat = e["qhat"], e["Vhat"], e["thetahat"]
    psi_t = trace_potential(q, V, theta, qhat, Vhat, thetahat)
    psi_w = l2_entropic_potential(lam, qhat, Vhat, thetahat)
    phi = psi_t + psi_w + alpha * e["psi_y"]
    return {
        "q": q, "V": V, "theta": theta, "qhat": qhat, "Vhat": Vhat, "thetahat": thetahat,
        "psi_t": psi_t, "psi_w": psi_w, "psi_y": e["psi_y"], "phi": phi, "train_loss": -phi,
        "train_loss_direct": alpha * e["mean_loss_at_prox"] + 0.5 * lam * q,
        "classification_error": classification_error(q, theta, delta),
        "eps_g": e["eps_g"], "test_loss": e["test_loss"],
        "residual": res, "quadrature_error": e["quadrature_error"],
    }


def classification_free_entropy(loss: str, alpha: float, lam: float, delta: float, x) -> float:
    """``Ψ_t + Ψ_w + α Ψ_y`` at an arbitrary ``x = (q, V, θ, q̂, V̂, θ̂)``."""
    return free_entropy(alpha, x, lambda *h: l2_entropic_potential(lam, *h),
                        lambda *o: energetic(loss, alpha, delta, *o)["psi_y"])

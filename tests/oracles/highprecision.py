"""An independent high-precision route to the classification integrals, and the accuracy it certifies.

:func:`energetic_mp` recomputes ``Ψ_y, q̂, V̂, θ̂`` of :mod:`tests.oracles.classification` with
mpmath (25 digits, tanh-sinh quadrature in the centre variable ξ, the logistic prox solved per
node by a bracketed root search — not the prox-parametrised double-precision route). At a
double-precision fixed point ``x*`` the difference ``δ = map_mp(x*) − x*`` is the map's true
residual; the fixed point's error is then ``≈ (I − J)⁻¹ δ`` with ``J`` the map's Jacobian
(finite differences), which :func:`accuracy_estimate` reports as a bound.
"""
from __future__ import annotations

import mpmath as mp
import numpy as np

from .classification import energetic
from .common import RHO, l2_entropic_map

DPS = 25
XI_RANGE = 40  # φ(40) ~ 1e-348: nothing beyond it reaches 25 digits


def energetic_mp(loss: str, alpha: float, delta: float, q: float, V: float, theta: float) -> dict[str, mp.mpf]:
    """``Ψ_y`` and ``q̂, V̂, θ̂`` at 25 digits (same equations, independent quadrature and prox)."""
    with mp.workdps(DPS):
        q, V, theta, delta, alpha = (mp.mpf(v) for v in (q, V, theta, delta, alpha))
        sq = mp.sqrt(q)
        D = q * (RHO + delta) - theta ** 2
        a = theta / mp.sqrt(D)
        cache: dict = {}

        def env(x):
            if x not in cache:
                w = sq * x
                if loss == "hinge":
                    if w < 1 - V:
                        cache[x] = (1 - w - V / 2, mp.mpf(1))
                    elif w <= 1:
                        cache[x] = ((1 - w) ** 2 / (2 * V), (1 - w) / V)
                    else:
                        cache[x] = (mp.mpf(0), mp.mpf(0))
                elif loss == "logistic":
                    P = mp.findroot(lambda p: p - V / (1 + mp.exp(p)) - w, (w - 1, w + V + 1), solver="anderson")
                    s = 1 / (1 + mp.exp(P))
                    cache[x] = (V * s * s / 2 + mp.log1p(mp.exp(-P)), s)
                else:
                    raise ValueError(f"no high-precision route for loss {loss!r}")
            return cache[x]

        pts = [mp.mpf(-XI_RANGE), mp.mpf(0), mp.mpf(XI_RANGE)]
        if loss == "hinge":
            pts = sorted({p for p in (mp.mpf(-XI_RANGE), mp.mpf(0), (1 - V) / sq, 1 / sq) if abs(p) <= XI_RANGE})
        I_M = mp.quad(lambda x: mp.npdf(x) * mp.ncdf(a * x) * env(x)[0], pts)
        I_ff = mp.quad(lambda x: mp.npdf(x) * mp.ncdf(a * x) * env(x)[1] ** 2, pts)
        I_th = mp.quad(lambda x: mp.npdf(x) * mp.npdf(a * x) * x * env(x)[0], pts)
        I_xf = mp.quad(lambda x: mp.npdf(x) * mp.ncdf(a * x) * x * env(x)[1], pts)
        D32 = D ** mp.mpf(1.5)
        return {"psi_y": -2 * I_M, "qhat": 2 * alpha * I_ff,
                "thetahat": -2 * alpha * q * (RHO + delta) / D32 * I_th,
                "Vhat": -2 * alpha * theta * (RHO + delta) / D32 * I_th - 2 * alpha * I_xf / sq}


def accuracy_estimate(fp: dict, loss: str, lam: float, delta: float) -> dict[str, float]:
    """Error bound of an ℓ2 classification fixed point ``fp`` (a :func:`state_evolution` result).

    Returns ``map_error`` (max relative difference between the 25-digit map and the state),
    ``amplification`` (``‖(I − J)⁻¹‖_∞`` in relative coordinates) and ``bound`` (their product:
    the relative error of ``q, V, θ`` to first order)."""
    alpha = fp["alpha"]
    x = np.array([fp["q"], fp["V"], fp["theta"]])
    e = energetic_mp(loss, alpha, delta, *x)
    with mp.workdps(DPS):
        lam_mp = mp.mpf(lam)
        Vn = 1 / (lam_mp + e["Vhat"])
        new = [(e["qhat"] + e["thetahat"] ** 2) * Vn ** 2, Vn, e["thetahat"] * Vn]
        map_error = max(float(abs((n - mp.mpf(v)) / n)) for n, v in zip(new, x))

    def fmap(y: np.ndarray) -> np.ndarray:
        en = energetic(loss, alpha, delta, *y)
        return np.array(l2_entropic_map(lam, en["qhat"], en["Vhat"], en["thetahat"]))

    J = np.empty((3, 3))  # relative coordinates: J_ij = ∂ log map_i / ∂ log x_j
    for j in range(3):
        h = 1e-6 * x[j]
        up, dn = x.copy(), x.copy()
        up[j] += h
        dn[j] -= h
        J[:, j] = (fmap(up) - fmap(dn)) / (2 * h) * x[j] / x
    amp = float(np.linalg.norm(np.linalg.inv(np.eye(3) - J), np.inf))
    return {"map_error": map_error, "amplification": amp, "bound": amp * map_error}

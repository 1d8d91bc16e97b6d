"""A two-unit soft committee with the square loss: its replica-symmetric equations written by hand.

Model (Saad & Solla's soft committee, trained by ERM; docs/how-to/committees.md)::

    S(h) = (tanh h_1 + tanh h_2) / √2,    T(h*) = (tanh h*_1 + tanh h*_2) / √2,
    ℓ(h, h*) = (T(h*) − S(h))² / 2,       r(w) = (λ/2) |w|²,    x ~ N(0, I_d),  ρ = I_2.

Order parameters are full 2×2 matrices: ``q`` (symmetric), ``V`` (symmetric), ``θ`` (general), and
their conjugates; the free entropy (docs/explanation/theory.md §3) is

    Φ = ½ tr(V̂ q) − ½ tr(q̂ V) − tr(θ̂ᵀ θ) + ½ tr[(λ + V̂)⁻¹ (q̂ + θ̂ θ̂ᵀ)] + α Ψ_y(q, V, θ),
    Ψ_y = −E min_h [ ½ (h − ω)ᵀ V⁻¹ (h − ω) + ℓ(h, h*) ],   (ω, h*) ~ N(0, [[q, θ], [θᵀ, ρ]]).

Stationarity, by matrix calculus on this Φ (``G_X = ∂Ψ_y/∂X`` the gradient with ``dΨ = tr(G_Xᵀ dX)``):

    V̂ = −2α G_q,     q̂ = 2α G_V,     θ̂ = α G_θ,
    V = (λ + V̂)⁻¹,   q = V (q̂ + θ̂ θ̂ᵀ) V,   θ = V θ̂,

iterated with damping from a start. Nothing here comes from the toolkit: ``Ψ_y`` is averaged on a
tensor Gauss-Hermite rule (``numpy.polynomial.hermite_e``) with ``ω = q^{1/2} ξ``,
``h* = θᵀ q^{−1/2} ξ + (ρ − θᵀ q⁻¹ θ)^{1/2} η`` (matrix square roots by eigendecomposition: the
same nodes as the toolkit's unit-symmetric ansatz, so the two agree to the solvers' tolerances), the
inner minimum by Newton from several starts, and ``G`` by central finite differences of ``Ψ_y``
itself (no envelope theorem, no symbolic derivative).
"""
from __future__ import annotations

import itertools

import numpy as np

#: central-difference step on the order parameters
FD_STEP = 1e-5


def _sqrtm(M: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(M)
    return (U * np.sqrt(w)) @ U.T


def gauss_hermite(order: int, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Tensor Gauss-Hermite nodes ``(dim, n^dim)`` and weights for the standard normal."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / w.sum()
    nodes = np.array(list(itertools.product(x, repeat=dim))).T
    weights = np.prod(np.array(list(itertools.product(w, repeat=dim))), axis=1)
    return nodes, weights


def _loss_terms(h: np.ndarray, y: np.ndarray):
    """The loss, its gradient and Hessian in ``h`` (2, n) for the teacher output ``y`` (n,)."""
    t = np.tanh(h)
    s = (t[0] + t[1]) / np.sqrt(2)
    r = s - y
    d1 = (1 - t ** 2) / np.sqrt(2)          # dS/dh_k
    d2 = -2 * t * (1 - t ** 2) / np.sqrt(2)  # d2S/dh_k^2
    grad = r * d1
    hess = np.empty((2, 2) + r.shape)
    hess[0, 0] = d1[0] ** 2 + r * d2[0]
    hess[1, 1] = d1[1] ** 2 + r * d2[1]
    hess[0, 1] = hess[1, 0] = d1[0] * d1[1]
    return 0.5 * r ** 2, grad, hess


def bracket_minimum(omega: np.ndarray, y: np.ndarray, Vinv: np.ndarray) -> np.ndarray:
    """``min_h ½ (h − ω)ᵀ V⁻¹ (h − ω) + (y − S(h))²/2`` at every node, the lowest of damped Newton
    descents from ``ω``, ``0``, ``−ω`` and the two axes."""
    best = np.full(y.shape, np.inf)
    starts = [omega, np.zeros_like(omega), -omega, np.array([omega[0], -omega[1]]), np.array([-omega[0], omega[1]])]
    for h0 in starts:
        h = h0.copy()
        for _ in range(200):
            _, g, H = _loss_terms(h, y)
            G = np.einsum("ij,jn->in", Vinv, h - omega) + g
            a, b, c = Vinv[0, 0] + H[0, 0], Vinv[0, 1] + H[0, 1], Vinv[1, 1] + H[1, 1]
            # Levenberg: shift the Hessian until positive definite (its smaller eigenvalue at least 1e-3)
            low = 0.5 * (a + c) - np.sqrt(0.25 * (a - c) ** 2 + b ** 2)
            mu = np.maximum(0.0, 1e-3 - low)
            a, c = a + mu, c + mu
            det = a * c - b * b
            step = -np.array([c * G[0] - b * G[1], -b * G[0] + a * G[1]]) / det
            h = h + step
            if np.max(np.abs(step)) < 1e-13:
                break
        val = 0.5 * np.einsum("in,ij,jn->n", h - omega, Vinv, h - omega) + _loss_terms(h, y)[0]
        best = np.minimum(best, val)
    return best


def psi_y(q: np.ndarray, V: np.ndarray, theta: np.ndarray, rule) -> float:
    """``Ψ_y = −E min_h [...]`` on the rule ``(nodes, weights)``."""
    nodes, weights = rule
    S = _sqrtm(q)
    A = theta.T @ np.linalg.inv(S)
    D = _sqrtm(np.eye(2) - theta.T @ np.linalg.inv(q) @ theta)
    xi, eta = nodes[:2], nodes[2:]
    omega = S @ xi
    hstar = A @ xi + D @ eta
    y = (np.tanh(hstar[0]) + np.tanh(hstar[1])) / np.sqrt(2)
    return -float(bracket_minimum(omega, y, np.linalg.inv(V)) @ weights)


def gradients(q, V, theta, rule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(G_q, G_V, G_θ)`` by central differences (a symmetric pair ``(i, j), (j, i)`` moved together
    counts twice in ``tr(Gᵀ dX)``, hence the halves off the diagonal)."""
    out = []
    for which in range(3):
        X = (q, V, theta)[which]
        G = np.zeros_like(X)
        for i in range(2):
            for j in range(2):
                if which < 2 and j < i:
                    continue
                E = np.zeros((2, 2))
                E[i, j] = FD_STEP
                if which < 2:
                    E[j, i] = FD_STEP
                args_p = [q, V, theta]
                args_m = [q, V, theta]
                args_p[which] = X + E
                args_m[which] = X - E
                d = (psi_y(*args_p, rule) - psi_y(*args_m, rule)) / (2 * FD_STEP)
                if which < 2 and i != j:
                    G[i, j] = G[j, i] = d / 2
                else:
                    G[i, j] = d
        out.append(G)
    return tuple(out)


def saddle_map(alpha: float, lam: float, q: np.ndarray, V: np.ndarray, theta: np.ndarray, rule
               ) -> dict[str, np.ndarray]:
    """One application of the equations: conjugates from ``(q, V, θ)``, then ``(q, V, θ)`` from them."""
    Gq, GV, Gt = gradients(q, V, theta, rule)
    Vh, qh, thh = -2 * alpha * Gq, 2 * alpha * GV, alpha * Gt
    Vn = np.linalg.inv(lam * np.eye(2) + Vh)
    return {"q": Vn @ (qh + thh @ thh.T) @ Vn, "V": Vn, "theta": Vn @ thh, "qhat": qh, "Vhat": Vh, "thetahat": thh}


def free_entropy(alpha: float, lam: float, state: dict, rule) -> float:
    """``Φ`` at ``state`` (its order parameters and conjugates)."""
    q, V, th = state["q"], state["V"], state["theta"]
    qh, Vh, thh = state["qhat"], state["Vhat"], state["thetahat"]
    return float(0.5 * np.trace(Vh @ q) - 0.5 * np.trace(qh @ V) - np.trace(thh.T @ th)
                 + 0.5 * np.trace(np.linalg.inv(lam * np.eye(2) + Vh) @ (qh + thh @ thh.T))
                 + alpha * psi_y(q, V, th, rule))


def state_evolution(alpha: float, lam: float, order: int = 10, start: dict | None = None, damping: float = 0.5,
                    tol: float = 1e-10, max_iter: int = 400) -> dict[str, np.ndarray]:
    """The fixed point ``{q, V, theta, qhat, Vhat, thetahat, phi, iterations}`` (2×2 matrices) from
    ``start`` (default: a specialised state) by the damped iteration of :func:`saddle_map`."""
    rule = gauss_hermite(order)
    st = start or {"q": np.array([[0.3, 0.05], [0.05, 0.3]]), "V": np.array([[2.0, 0.0], [0.0, 2.0]]),
                   "theta": np.array([[0.4, 0.1], [0.1, 0.4]])}
    x = {k: np.array(st[k], dtype=float) for k in ("q", "V", "theta")}
    for it in range(max_iter):
        new = saddle_map(alpha, lam, x["q"], x["V"], x["theta"], rule)
        step = max(float(np.max(np.abs(new[k] - x[k]))) for k in x)
        x = {k: (1 - damping) * x[k] + damping * new[k] for k in x}
        if step < tol:
            break
    else:
        raise RuntimeError(f"the hand-written state evolution did not converge (last step {step:.2e})")
    out = {**new, **x}
    out["phi"] = free_entropy(alpha, lam, out, rule)
    out["iterations"] = it + 1
    return out

"""Order parameters in the theory's conventions (docs/explanation/theory.md §2, §5) and seed statistics.

For each token ℓ, with ``W ∈ R^{d×r}`` the student weights (``W = Q`` tied, ``[Q K]``
untied) and ``Σ_ℓ = diag(v_ℓ)``:

    q_ℓ = Wᵀ Σ_ℓ W / d  (r×r)      m_ℓ = Wᵀ p_ℓ / √d  (r)      θ_ℓ = Wᵀ Σ_ℓ Q* / d  (r×r_t)
    ρ_ℓ = Q*ᵀ Σ_ℓ Q* / d  (r_t×r_t)                             ρ̄_ℓ = tr Σ_ℓ / d

Sign convention. ``S`` and ``T`` are even in ``h`` and ``h*`` (docs/explanation/theory.md §6), so the sign of
each student column group (``sign_groups`` of the attention study's students,
:mod:`numerics.applications.attention.students`) and of each
teacher column is arbitrary. We fix them as follows:

1. student group: flip it so that, among its ``m_1`` entries, the one of largest ``|.|`` is
   ``≥ 0``; if all its ``m_1`` entries vanish (< 1e-12), use the largest-``|.|`` entry of its
   ``θ_1`` rows instead;
2. teacher column ``t``: flip it so that the largest-``|.|`` entry of ``θ_1[:, t]`` is ``≥ 0``.

For ``r = r_t = 1`` (tied) this is exactly ``m = |m_1|``, ``θ = |θ_1|``. For tied ``r > 1``
``softmax_row(h hᵀ)`` is in fact invariant under every rotation ``h → hO``; the column signs
are the part of it a per-column rule can remove, so compare ``r > 1`` matrices to theory
through rotation-invariant quantities (e.g. eigenvalues of ``q``) where that matters.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = [
    "order_parameters",
    "fix_signs",
    "mean_se",
    "aggregate",
    "linear_formula_mc",
]


def fix_signs(
    W: np.ndarray,
    Qstar: np.ndarray,
    variances: np.ndarray,
    P: np.ndarray,
    sign_groups: Sequence[Sequence[int]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(s, s*)``: ±1 signs for the columns of ``W`` and of ``Q*`` (module docstring)."""
    d, r = W.shape
    groups = [list(g) for g in sign_groups] if sign_groups is not None else [[j] for j in range(r)]
    m1 = W.T @ P[0] / math.sqrt(d)
    th = (W * variances[0][:, None]).T @ Qstar / d  # θ_1
    s = np.ones(r)
    for g in groups:
        mg = m1[g]
        if np.max(np.abs(mg)) > 1e-12:
            k = int(np.argmax(np.abs(mg)))
            s[g] = 1.0 if mg[k] >= 0 else -1.0
        else:
            tg = th[g]
            k = np.unravel_index(int(np.argmax(np.abs(tg))), tg.shape)
            s[g] = 1.0 if tg[k] >= 0 else -1.0
    th_signed = s[:, None] * th
    s_star = np.ones(Qstar.shape[1])
    for t in range(Qstar.shape[1]):
        col = th_signed[:, t]
        k = int(np.argmax(np.abs(col)))
        s_star[t] = 1.0 if col[k] >= 0 else -1.0
    return s, s_star


def order_parameters(
    W: np.ndarray,
    Qstar: np.ndarray,
    variances: np.ndarray,
    P: np.ndarray,
    sign_groups: Sequence[Sequence[int]] | None = None,
    fix_sign: bool = True,
) -> dict[str, Any]:
    """Order parameters of ``W`` (d×r) against ``Q*`` (d×r_t) for every token (docs/explanation/theory.md §2).

    ``variances``: (L, d) diagonals of ``Σ_ℓ``; ``P``: (L, d) encodings. Returns
    ``{"per_token": {"q": (L,r,r), "m": (L,r), "theta": (L,r,r_t), "rho": (L,r_t,r_t),
    "rho_bar": (L,)}, "q", "m", "theta", "rho", "rho_bar"}`` where the top-level entries
    are token 1's, as floats when ``r = r_t = 1`` and arrays otherwise. Signs are fixed as
    in the module docstring unless ``fix_sign`` is False.
    """
    W = np.asarray(W, dtype=float)
    Qstar = np.asarray(Qstar, dtype=float)
    d = W.shape[0]
    if fix_sign:
        s, s_star = fix_signs(W, Qstar, variances, P, sign_groups)
        W = W * s
        Qstar = Qstar * s_star
    q = np.einsum("di,ld,dj->lij", W, variances, W) / d
    m = np.einsum("di,ld->li", W, P) / math.sqrt(d)
    theta = np.einsum("di,ld,dt->lit", W, variances, Qstar) / d
    rho = np.einsum("dt,ld,du->ltu", Qstar, variances, Qstar) / d
    rho_bar = variances.mean(axis=1)
    per_token = {"q": q, "m": m, "theta": theta, "rho": rho, "rho_bar": rho_bar}

    def top(a: np.ndarray) -> float | np.ndarray:
        return float(a.reshape(-1)[0]) if a.size == 1 else a

    out: dict[str, Any] = {k: top(v[0]) for k, v in per_token.items()}
    out["per_token"] = per_token
    return out


def mean_se(values: Sequence[Any]) -> tuple[Any, Any]:
    """Mean and standard error (``std(ddof=1)/√K``) over seeds, elementwise for arrays.

    With one seed the standard error is NaN (undefined), never 0.
    """
    a = np.asarray(values, dtype=float)
    mean = a.mean(axis=0)
    if a.shape[0] > 1:
        se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0])
    else:
        se = np.full_like(mean, np.nan)
    if np.ndim(mean) == 0:
        return float(mean), float(se)
    return mean, se


def aggregate(runs: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """``{key: mean, key_se: se}`` over ``runs`` for each ``key`` (arrays as nested lists)."""
    out: dict[str, Any] = {}
    for k in keys:
        mean, se = mean_se([r[k] for r in runs])
        out[k] = mean.tolist() if isinstance(mean, np.ndarray) else mean
        out[k + "_se"] = se.tolist() if isinstance(se, np.ndarray) else se
    return out


def linear_formula_mc(
    target: Callable[[Any], Any],
    rho: Sequence[Any] | np.ndarray,
    rho_bar: Sequence[float] | np.ndarray,
    n_mc: int = 200_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Monte-Carlo of the linear baseline's large-d limit (paper Result 5.1, docs/explanation/theory.md §6):

        B̂ = E[T(h*)],   ε_g^lin = ½ Σ_{ℓκ} ρ̄_κ Var[T(h*)_{ℓκ}],   h*_ℓ ~ N(0, ρ_ℓ) indep.

    ``rho``: per-token ``ρ_ℓ`` (scalars or r_t×r_t matrices); ``target`` a torch target.
    Returns ``{"eps_g", "eps_g_se", "B"}`` (the SE is the Monte-Carlo one, from the
    per-sample values ``½ Σ ρ̄_κ (T − B̂)²_{ℓκ}``).
    """
    import torch

    rng = np.random.default_rng(seed)
    rho_m = [np.atleast_2d(np.asarray(r, dtype=float)) for r in rho]
    L = len(rho_m)
    r_t = rho_m[0].shape[0]
    z = rng.standard_normal((n_mc, L, r_t))
    h = np.stack([z[:, l] @ np.linalg.cholesky(rho_m[l]).T for l in range(L)], axis=1)
    T = target(torch.as_tensor(h, dtype=torch.float64)).numpy()
    B = T.mean(axis=0)
    per = 0.5 * (((T - B) ** 2) * np.asarray(rho_bar, dtype=float)[None, None, :]).sum(axis=(1, 2))
    return {
        "eps_g": float(per.mean()),
        "eps_g_se": float(per.std(ddof=1) / math.sqrt(n_mc)),
        "B": B,
    }

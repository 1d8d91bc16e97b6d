"""Exact minimisers of the declared GLMs' empirical risk (ridge, lasso, logistic, hinge), each with
its KKT violation: shared by the GLM simulator (:mod:`numerics.glm`) and the declaration-driven
problem (:mod:`numerics.problem`), which both import them from here, not from each other."""
from __future__ import annotations

from typing import Any

import numpy as np


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


# --- solvers -----------------------------------------------------------------------------------------------

def _solve_ridge(Xs: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float, str]:
    from scipy import linalg

    A = Xs.T @ Xs
    A[np.diag_indices_from(A)] += lam
    w = linalg.cho_solve(linalg.cho_factor(A), Xs.T @ y)
    kkt = float(np.max(np.abs(Xs.T @ (Xs @ w - y) + lam * w)))
    return w, kkt, "cholesky"


def _logistic_grad(Xs, y, w, lam):
    m = y * (Xs @ w)
    s = np.exp(-_softplus(m))  # σ(−m)
    return -Xs.T @ (y * s) + lam * w, m


def _solve_logistic(Xs: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float, str]:
    from scipy import linalg
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=1.0 / lam, fit_intercept=False, solver="newton-cholesky", tol=1e-12, max_iter=500)
    clf.fit(Xs, y)
    w = clf.coef_.ravel().astype(float)
    solver = f"sklearn newton-cholesky ({int(np.max(clf.n_iter_))} it)"
    g, m = _logistic_grad(Xs, y, w, lam)
    steps = 0
    while np.max(np.abs(g)) > 1e-10 and steps < 3:  # exact Newton on R, polishing sklearn's tolerance
        s = np.exp(-_softplus(m))
        H = (Xs.T * (s * (1 - s))) @ Xs
        H[np.diag_indices_from(H)] += lam
        w = w - linalg.cho_solve(linalg.cho_factor(H), g)
        g, m = _logistic_grad(Xs, y, w, lam)
        steps += 1
    if steps:
        solver += f" + {steps} Newton step(s)"
    return w, float(np.max(np.abs(g))), solver


def _hinge_kkt(Z: np.ndarray, a: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    w = Z.T @ a / lam
    m = Z @ w
    viol = np.where(a <= 0, np.maximum(0.0, 1.0 - m), np.where(a >= 1, np.maximum(0.0, m - 1.0), np.abs(m - 1.0)))
    viol = np.maximum(viol, np.maximum(-a, a - 1.0))
    return w, float(np.max(viol))


def _active_set_polish(Z: np.ndarray, lam: float, L: np.ndarray, U: np.ndarray, max_iter: int = 50
                       ) -> tuple[np.ndarray, int]:
    """Primal–dual active-set method for the SVM dual ``min_a ½ aᵀQa − Σa, 0 ≤ a ≤ 1``
    (``Q = ZZᵀ/λ``, gradient ``g = margin − 1``; Hintermüller, Ito & Kunisch, SIAM J. Optim. 13
    (2003)): ``a = 0`` on ``L``, ``a = 1`` on ``U``, and the rest ``I`` on the margin (``g_I = 0``,
    a linear system of size |I| ≤ d); new sets ``L = {a − g < 0}``, ``U = {a − g > 1}``; stop when
    they repeat (the solution is then exact). Needs sets close to the optimal ones to start."""
    a = np.zeros(Z.shape[0])
    for k in range(max_iter):
        I = ~(L | U)
        a = np.where(U, 1.0, 0.0)
        if I.any():
            ZI = Z[I]
            rhs = lam * np.ones(int(I.sum())) - ZI @ (Z[U].T @ np.ones(int(U.sum())))
            a[I] = np.linalg.lstsq(ZI @ ZI.T, rhs, rcond=None)[0]
        t = a - (Z @ (Z.T @ a) / lam - 1.0)
        L2, U2 = t < 0.0, t > 1.0
        if np.array_equal(L2, L) and np.array_equal(U2, U):
            return a, k
        L, U = L2, U2
    return a, max_iter


def _solve_hinge(Xs: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float, str]:
    """The SVM exactly: scikit-learn ``LinearSVC(C = 1/λ, loss="hinge", dual=True,
    fit_intercept=False)`` (liblinear's dual coordinate descent; it minimises ``½|w|² + C Σ hinge``,
    ours divided by λ) finds the active sets to a moderate tolerance, then the primal–dual
    active-set method solves the dual QP exactly (``w = Zᵀa/λ``, ``Z = y ∘ X'``). The tolerance is
    tightened until the KKT residual is ≤ 1e-10."""
    import warnings

    from sklearn.svm import LinearSVC

    Z = y[:, None] * Xs
    best: tuple[float, Any, str] = (np.inf, None, "")
    for tol in (1e-4, 1e-6, 1e-8):
        svc = LinearSVC(C=1.0 / lam, loss="hinge", dual=True, fit_intercept=False, tol=tol, max_iter=10 ** 6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # judged below by the KKT residual
            svc.fit(Xs, y)
        m = Z @ svc.coef_.ravel()
        a, k = _active_set_polish(Z, lam, m > 1.0 + 1e-3, m < 1.0 - 1e-3)
        w, kkt = _hinge_kkt(Z, a, lam)
        if kkt < best[0]:
            best = (kkt, w, f"sklearn LinearSVC (liblinear dual CD, tol {tol:g}, {int(svc.n_iter_)} it) "
                            f"+ dual active set ({k} it, {int(np.sum((a > 0) & (a < 1)))} on the margin)")
        if kkt <= 1e-10:
            break
    return best[1], best[0], best[2]


def _lasso_kkt(Xs, y, w, lam1):
    g = Xs.T @ (Xs @ w - y)
    nz = w != 0
    viol = np.where(nz, np.abs(g + lam1 * np.sign(w)), np.maximum(0.0, np.abs(g) - lam1))
    return float(np.max(viol))


def _solve_lasso(Xs: np.ndarray, y: np.ndarray, lam1: float) -> tuple[np.ndarray, float, str]:
    from scipy import linalg
    from sklearn.linear_model import Lasso

    n = Xs.shape[0]
    reg = Lasso(alpha=lam1 / n, fit_intercept=False, tol=1e-12, max_iter=200000, selection="cyclic")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-convergence is judged below by the KKT residual
        reg.fit(Xs, y)
    w = reg.coef_.astype(float).copy()
    kkt = _lasso_kkt(Xs, y, w, lam1)
    solver = f"sklearn coordinate descent ({int(reg.n_iter_)} it)"
    S = w != 0
    if S.any():  # exact polish on the support with its signs
        XS = Xs[:, S]
        try:
            wS = linalg.solve(XS.T @ XS, XS.T @ y - lam1 * np.sign(w[S]), assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            wS = None
        if wS is not None and np.all(np.sign(wS) == np.sign(w[S])):
            v = np.zeros_like(w)
            v[S] = wS
            kv = _lasso_kkt(Xs, y, v, lam1)
            if kv < kkt:
                w, kkt, solver = v, kv, solver + " + support polish"
    return w, kkt, solver

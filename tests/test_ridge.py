"""Ridge regression declared as a model reproduces the random-matrix test error (issue 4).

Oracle (hand-typed here, not used by the toolkit): for ``x ~ N(0, I_d)``, ``n = alpha d``,
``F = X^T X / d`` has Stieltjes transform ``g(-lambda) = (1/d) tr (F + lambda)^{-1}``, the
positive root of ``lambda g^2 + (alpha - 1 + lambda) g - 1 = 0`` (Marchenko-Pastur). With
``T2 = (1/d) tr (F + lambda)^{-2} = -dg/dlambda = (g^2 + g) / (2 lambda g + alpha - 1 + lambda)``
the bias-variance decomposition of the ridge estimator gives
``eps_g = 1/2 [lambda^2 rho T2 + Delta (g - lambda T2) + Delta]`` (``rho = 1``).
"""
from __future__ import annotations

import numpy as np
import pytest

from replica.numeric.solver import Solver


def ridge_test_error(alpha: float, lam: float, delta: float) -> float:
    b = alpha - 1 + lam
    g = (-b + np.sqrt(b * b + 4 * lam)) / (2 * lam)
    t2 = (g * g + g) / (2 * lam * g + b)
    return 0.5 * (lam ** 2 * t2 + delta * (g - lam * t2) + delta)


@pytest.mark.parametrize("alpha,lam,delta", [(0.5, 0.1, 0.25), (2.0, 0.01, 0.5), (1.0, 1.0, 0.0),
                                             (3.0, 1e-3, 0.1), (0.3, 0.05, 1.0)])
def test_ridge_matches_random_matrix_formula(ridge, alpha, lam, delta):
    fp = Solver(ridge, {"lam": lam, "Delta": delta}, branch="centered", tol=1e-10).solve(alpha)
    assert fp.converged
    assert fp.eps_g == pytest.approx(ridge_test_error(alpha, lam, delta), abs=1e-6)


def test_ridge_oracle_against_a_finite_random_matrix():
    """The oracle itself, checked on one large random instance (d = 1500, error ~1/sqrt(d))."""
    rng = np.random.default_rng(0)
    d, alpha, lam, delta = 1500, 1.5, 0.1, 0.2
    n = int(alpha * d)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    w *= np.sqrt(d) / np.linalg.norm(w)  # rho = |w*|^2 / d = 1 exactly
    y = X @ w / np.sqrt(d) + np.sqrt(delta) * rng.standard_normal(n)
    what = np.linalg.solve(X.T @ X / d + lam * np.eye(d), X.T @ y / np.sqrt(d))
    eps = 0.5 * (np.sum((what - w) ** 2) / d + delta)
    assert eps == pytest.approx(ridge_test_error(alpha, lam, delta), rel=0.05)

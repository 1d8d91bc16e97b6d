"""A notebook-style fixed-point update for the paper's model, as a theorist would type it.

This is the *baseline* of ``python -m benchmarks`` (issue 9): the saddle-point update of
docs/explanation/theory.md §4–§6 for tied attention (``L = 2``, ``r = r_t = 1``, token-reduced scalars
``q, V, m, theta``), written by hand from the formulas, with

* hand-typed loss, bracket and envelope gradients (no sympy, no generated code),
* a per-node ``scipy.optimize.minimize`` (BFGS with the hand-typed gradient) for the
  proximal problem, from the same starts as the generated module (``h = omega``, ``0``,
  ``-omega``), keeping the lowest minimum,
* plain Python loops over the quadrature nodes.

It deliberately shares nothing with :mod:`replica` except the quadrature nodes it is
given, so that agreement with the generated solver (checked by the benchmark and by
``tests/test_benchmarks.py``) is an independent check of the whole pipeline.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize


def sigmoid(u):
    return 1.0 / (1.0 + math.exp(-u)) if u >= 0 else math.exp(u) / (1.0 + math.exp(u))


def loss_and_grads(h1, h2, s1, s2, omega, sigma, A):
    """Per-sample loss l(h, h*) = 1/2 sum_{l,k} rho_bar (T - S)^2_{lk} for L = 2 (docs/explanation/theory.md §1),
    with its derivatives in the student fields (dl/dh1, dl/dh2) and the teacher fields.

    Row l of softmax(h h^T) for two tokens: S_ll = sigmoid(h_l^2 - h_l h_k), S_lk = 1 - S_ll.
    A's rows sum to one, so (T - S)_{lk} = -(T - S)_{ll} and each row contributes
    rho_bar (T_ll - S_ll)^2 with rho_bar = sigma^2.
    """
    rb = sigma ** 2
    # student
    a1, a2 = h1 * h1 - h1 * h2, h2 * h2 - h1 * h2
    S1, S2 = sigmoid(a1), sigmoid(a2)
    # teacher
    b1, b2 = s1 * s1 - s1 * s2, s2 * s2 - s1 * s2
    T1 = (1 - omega) * sigmoid(b1) + omega * A[0][0]
    T2 = (1 - omega) * sigmoid(b2) + omega * A[1][1]
    D1, D2 = T1 - S1, T2 - S2
    loss = rb * (D1 ** 2 + D2 ** 2)
    # d/dh: dS_l/da_l = S_l (1 - S_l); da1/dh1 = 2 h1 - h2, da1/dh2 = -h1, ...
    dS1, dS2 = S1 * (1 - S1), S2 * (1 - S2)
    dl_dh1 = -2 * rb * (D1 * dS1 * (2 * h1 - h2) + D2 * dS2 * (-h2))
    dl_dh2 = -2 * rb * (D1 * dS1 * (-h1) + D2 * dS2 * (2 * h2 - h1))
    # d/ds (teacher fields), same structure with T
    dT1 = (1 - omega) * sigmoid(b1) * (1 - sigmoid(b1))
    dT2 = (1 - omega) * sigmoid(b2) * (1 - sigmoid(b2))
    dl_ds1 = 2 * rb * (D1 * dT1 * (2 * s1 - s2) + D2 * dT2 * (-s2))
    dl_ds2 = 2 * rb * (D1 * dT1 * (-s1) + D2 * dT2 * (2 * s2 - s1))
    return loss, dl_dh1, dl_dh2, dl_ds1, dl_ds2


def fixed_point_update(state, alpha, params, nodes, weights, branch="semantic"):
    """One application of the saddle-point map ``(q, V, m, theta) -> new (q, V, m, theta)``.

    ``params``: dict with ``omega, sigma, lam`` and ``A`` (2x2 nested list); ``nodes``
    (4, N) standard Gaussians ``(xi_1, xi_2, eta_1, eta_2)`` and ``weights`` (N,).
    Returns ``(new_state, psi_y)`` with ``psi_y = -E min_h F``.
    """
    q, V, m, theta = (float(v) for v in state)
    omega, sigma, lam, A = params["omega"], params["sigma"], params["lam"], params["A"]
    rho = sigma ** 2
    sq = math.sqrt(q)
    res = math.sqrt(rho - theta ** 2 / q)
    dres_dq = (theta ** 2 / q ** 2) / (2 * res)
    dres_dth = -(theta / q) / res
    dPsi = np.zeros(4)   # dPsi_y/d(q, V, m, theta)
    psi = 0.0
    for j in range(nodes.shape[1]):
        xi1, xi2, eta1, eta2 = nodes[:, j]
        w = weights[j]
        # centres of the proximal problem: token 1 has m, token 2 has -m (p_2 = -p_1)
        c1, c2 = m + sq * xi1, -m + sq * xi2
        s1 = theta / sq * xi1 + res * eta1
        s2 = theta / sq * xi2 + res * eta2

        def F(h, c1=c1, c2=c2, s1=s1, s2=s2):
            l, g1, g2, _, _ = loss_and_grads(h[0], h[1], s1, s2, omega, sigma, A)
            val = ((h[0] - c1) ** 2 + (h[1] - c2) ** 2) / (2 * V) + l
            grad = np.array([(h[0] - c1) / V + g1, (h[1] - c2) / V + g2])
            return val, grad

        best = None
        for h0 in ([c1, c2], [0.0, 0.0], [-c1, -c2]):
            r = minimize(F, np.array(h0), jac=True, method="BFGS", options={"gtol": 1e-11, "maxiter": 500})
            if best is None or r.fun < best.fun:
                best = r
        h1, h2 = best.x
        l, _, _, ds1, ds2 = loss_and_grads(h1, h2, s1, s2, omega, sigma, A)
        # envelope theorem: dPsi_y/dx = -E dF/dx at the minimiser
        dF_dq = (-(h1 - c1) * xi1 / (2 * sq) - (h2 - c2) * xi2 / (2 * sq)) / V \
            + ds1 * (-theta * xi1 / (2 * q * sq) + dres_dq * eta1) \
            + ds2 * (-theta * xi2 / (2 * q * sq) + dres_dq * eta2)
        dF_dV = -((h1 - c1) ** 2 + (h2 - c2) ** 2) / (2 * V ** 2)
        dF_dm = (-(h1 - c1) + (h2 - c2)) / V
        dF_dth = ds1 * (xi1 / sq + dres_dth * eta1) + ds2 * (xi2 / sq + dres_dth * eta2)
        dPsi -= w * np.array([dF_dq, dF_dV, dF_dm, dF_dth])
        psi -= w * best.fun
    if branch in ("semantic", "agnostic"):
        dPsi[2] = 0.0
    if branch in ("positional", "agnostic"):
        dPsi[3] = 0.0
    # conjugates (docs/explanation/theory.md §4–§6): Vhat = -2 alpha dPsi/dq, qhat = 2 alpha dPsi/dV, ...
    Vhat, qhat = -2 * alpha * dPsi[0], 2 * alpha * dPsi[1]
    mhat, thhat = alpha * dPsi[2], alpha * dPsi[3]
    # entropic side, closed form for l2 and Sigma = sigma^2 I (docs/explanation/theory.md §6)
    s2 = sigma ** 2
    den = lam + s2 * Vhat
    new = np.array([s2 * (s2 * qhat + mhat ** 2 + s2 ** 2 * thhat ** 2) / den ** 2,
                    s2 / den, mhat / den, s2 ** 2 * thhat / den])
    return new, psi

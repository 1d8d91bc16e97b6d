"""LASSO: square loss on a noisy linear teacher with an l1 penalty (Bayati & Montanari's state evolution).

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* ~ N(0, 1)`` (dense Gaussian teacher weights),
label ``y = h* + sqrt(Delta) z`` (continuous: written into the loss), loss ``(y - h)^2 / 2`` summed
over samples, penalty ``lam1 |w|_1`` summed over coordinates. The entropic side is the Moreau
envelope of ``lam1 |w|`` (soft thresholding, found by sympy), averaged on a kink-aware rule along
the entropic field. Reported: the test loss (= half the test MSE) and the fraction of zero
weights. Oracle: tests/oracles/lasso.py.
"""
from __future__ import annotations

import sympy as sp

from replica import L1, Domain, EntropicObservable, Model, TokenStatistics, fields, parameter, symbol, \
    teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
noise = symbol("noise", "z")
delta = parameter("Delta", r"\Delta", "variance of the label noise")
lam1 = parameter("lam1", r"\lambda_1", "strength of the $\\ell_1$ penalty")
penalty = L1(lam1)
w = penalty.w[0]

model = Model(
    name="lasso",
    description="LASSO: square loss on y = h* + sqrt(Delta) z, l1 penalty lam1 (a GLM with L = 1)",
    h=h, hstar=hs,
    loss=sp.Rational(1, 2) * (hs[0] + sp.sqrt(delta) * noise - h[0]) ** 2,
    noise=[noise],
    data=TokenStatistics.isotropic(1, 1),
    regularizer=penalty,
    parameters={delta: 0.25, lam1: 0.1},
    domains={delta: Domain(0, None), lam1: Domain(0, None)},
    branches={"centered": ("m",)},
    observables=[EntropicObservable("zero_fraction", sp.Piecewise((1, sp.Eq(w, 0)), (0, True)), r"\rho_0",
                                    "fraction of zero weights", w=[w])],
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "lasso", "--write"])

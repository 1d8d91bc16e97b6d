"""Ridge regression as a model: the simplest GLM, with a closed-form test error to test against.

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* = Q*^T x / sqrt(d) ~ N(0, 1)``, label
``y = h* + sqrt(Delta) z``, square loss ``l = (y - h)^2 / 2`` and l2 penalty ``lambda``
(docs/explanation/theory.md §8). The toolkit derives its saddle point exactly as for attention; the
random-matrix formula for the ridge test error is the oracle in tests/test_ridge.py.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
noise = symbol("noise", "z")
delta = parameter("Delta", r"\Delta", "variance of the label noise")
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")

model = Model(
    name="ridge",
    description="ridge regression y = h* + sqrt(Delta) z, square loss, l2 penalty (a GLM with L = 1)",
    h=h, hstar=hs,
    loss=sp.Rational(1, 2) * (hs[0] + sp.sqrt(delta) * noise - h[0]) ** 2,
    noise=[noise],
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={delta: 0.25, lam: 0.1},
    domains={delta: Domain(0, None), lam: Domain(0, None)},
    branches={"centered": ("m",)},
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "ridge", "--write"])

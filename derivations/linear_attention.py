"""Tutorial model (notebooks/03_your_architecture.py): linear attention learning a linear-attention teacher.

``S(h) = h h^T`` (no softmax), ``T(h*) = h* h*^T``, paper's data (``L = 2``, ``Sigma = sigma^2 I``,
``p_1 = -p_2 = 1_d / sqrt(d)``), l2 penalty. A rank-one matrix-sensing problem: the loss
``1/2 sum_{l,k} sigma^2 (h*_l h*_k - h_l h_k)^2`` is quartic and non-convex in ``h``. Both maps are
even, so ``m = 0`` ("semantic": learns the teacher) and ``m = theta = 0`` ("agnostic") are branches.
"""
from __future__ import annotations

from replica import L2, Domain, Model, TokenReduction, TokenStatistics, fields, parameter, teacher_fields

h, hs = fields(2, 1), teacher_fields(2, 1)
sigma = parameter("sigma", r"\sigma", r"standard deviation of the token entries ($\Sigma_a = \sigma^2 I$)")
lam = parameter("lam", r"\lambda", r"strength of the $\ell_2$ penalty")

model = Model(
    name="linear_attention",
    description="linear attention S(h) = h h^T learning T(h*) = h* h*^T, L=2 (tutorial)",
    h=h, hstar=hs,
    student=h * h.T,
    target=hs * hs.T,
    data=TokenStatistics.isotropic(2, sigma ** 2, positional=(1, -1)),
    regularizer=L2(lam),
    parameters={sigma: 0.5, lam: 0.01},
    domains={sigma: Domain(0, None), lam: Domain(0, None)},
    reduction=TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]}),
    branches={"semantic": ("m",), "agnostic": ("m", "theta")},
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "linear_attention", "--write"])

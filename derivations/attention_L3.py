"""Tied dot-product attention on sentences of ``L = 3`` tokens (docs/explanation/theory.md §8: general ``L``).

``S(h) = softmax_row(h h^T)``, ``T(h*) = (1 - omega) softmax_row(h* h*^T) + omega A`` with a
``3 x 3`` row-stochastic ``A``. Encodings as in ``numerics.data.default_positional_encodings(3, d)``:
``p_l`` = Hadamard row ``l - 1`` over ``sqrt(d)``, so a coordinate ``i`` has projections
``(pi_1, pi_2, pi_3) = (1, (-1)^{i_0}, (-1)^{i_1})`` (bits of ``i``): four equally likely sign
patterns, ``E[pi pi^T] = I_3`` (exact for ``d`` a multiple of 4). All tokens have ``Sigma = sigma^2 I``,
so ``q_l, V_l, theta_l`` are the same for every token (the entropic side depends on their
conjugates only through sums) and are shared; ``m_1, m_2, m_3`` stay free.
"""
from __future__ import annotations

import sympy as sp

from replica import (L2, Domain, Model, SpectralAtom, TokenReduction, TokenStatistics, fields,
                     matrix_parameter, parameter, row_stochastic, softmax_rows, teacher_fields)
from replica.applications.attention.paper import BRANCHES, TRANSITION

A3 = [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]]

h, hs = fields(3, 1), teacher_fields(3, 1)
omega = parameter("omega", r"\omega", "positionality of the target: the weight of its positional part $A$")
sigma = parameter("sigma", r"\sigma", r"standard deviation of the token entries ($\Sigma_a = \sigma^2 I$)")
lam = parameter("lam", r"\lambda", r"strength of the $\ell_2$ penalty")
A = matrix_parameter("A", 3, 3, description="positional attention matrix of the target (row-stochastic)")
hadamard = TokenStatistics([SpectralAtom(sp.Rational(1, 4), (sigma ** 2,) * 3, (1, s2, s3))
                            for s2 in (1, -1) for s3 in (1, -1)])

model = Model(
    name="attention_L3",
    description="tied dot-product attention, L=3, r=1, r_t=1, Hadamard encodings",
    h=h, hstar=hs,
    student=softmax_rows(h * h.T),
    target=(1 - omega) * softmax_rows(hs * hs.T) + omega * A,
    data=hadamard,
    regularizer=L2(lam),
    parameters={omega: 0.3, sigma: 0.5, lam: 0.01, A: A3},
    domains={omega: Domain(0, 1), sigma: Domain(0, None), lam: Domain(0, None)},
    constraints=row_stochastic(A, "A"),
    reduction=TokenReduction({"q": [1, 1, 1], "V": [1, 1, 1], "theta": [1, 1, 1]}),
    branches=BRANCHES,
    transition=TRANSITION,
    baseline="linear",
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_L3", "--write"])

"""The binary perceptron: a sign teacher with +-1 weights, and a support vector machine as the student.

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* ~ N(0, 1)``, label ``y = sign(h*)`` (a channel), teacher
weights ``+-1`` with probability 1/2 (``prior=Rademacher()``). Empirical risk: the hinge loss
``max(0, 1 - y h)`` with ``lam/2 |w|^2`` (it sees the teacher only through its second moment, 1). Bayes-optimal
inference uses the prior: perfect recovery is information-theoretically possible beyond ``alpha_IT`` and
AMP reaches it beyond ``alpha_alg`` (``replica phase binary_perceptron --bayes``; docs/how-to/bayes_optimal.md).
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, Rademacher, Sign, TokenStatistics, classification_error, fields, parameter, \
    student_teacher_angle, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
channel = Sign(hs[0])
y = channel.label

model = Model(
    name="binary_perceptron",
    description="hinge loss on a sign teacher with +-1 weights (Rademacher prior), l2 penalty (a GLM)",
    h=h, hstar=hs,
    loss=sp.Max(0, 1 - y * h[0]),
    channel=channel,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.1},
    domains={lam: Domain(0, None)},
    prior=Rademacher(),
    observables=[classification_error(y, h[0]), student_teacher_angle()],
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "binary_perceptron", "--write"])
